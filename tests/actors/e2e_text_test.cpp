// End to end with the real Qwen3 tokenizer (the full-vocabulary golden model): text prompts,
// streamed text, stop strings and stop ids, tokenize.
#include "tests/actors/e2e_fixture.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/engine/generator.hpp"
#include "runtime/serve/reasoning_split.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {


const tokenizer& qwen3() {
  static tokenizer t(tokenizer_dir);
  return t;
}

const checkpoint& full_vocab() {
  static auto ck = load_checkpoint(full_vocab_dir);
  return *ck;
}

wire::generate_request text_request(std::string id, std::string prompt, int32_t max_tokens) {
  wire::generate_request r;
  r.id = std::move(id);
  r.kind = wire::prompt_kind::text;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0;
  return r;
}

std::vector<int32_t> reference_for_text(const wire::generate_request& r) {
  auto ids = r;
  ids.kind = wire::prompt_kind::ids;
  ids.prompt_ids = qwen3().encode(r.prompt);
  return reference(full_vocab(), ids);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_text)

// The `embed` op: texts are encoded with the tokenizer's special tokens and each input's embedding
// is exactly what `troupe embed` (generator::embed) gives it alone; token-id inputs, dimensions and
// normalize too; a refused input ends the request with an error naming the field.
BOOST_AUTO_TEST_CASE(embed_requests_return_the_embedding_of_each_input) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  generator g(full_vocab());
  wire::generate_request r;
  r.id = "emb-texts";
  r.embed.emplace();
  r.embed->texts = {"hello world", "你好, Troupe", "a third input, longer than the other two by some words"};
  r.n = 3;
  r.stream = false;
  const auto got = cl.embed(r);
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    BOOST_TEST(got[i] == g.embed(qwen3().encode_with_special_tokens(r.embed->texts[i]), embedding_options{}),
               boost::test_tools::per_element());

  wire::generate_request ids;
  ids.id = "emb-ids";
  ids.embed.emplace();
  ids.embed->ids = {{14990, 1879, 151643}};
  ids.embed->dimensions = 8;
  ids.embed->normalize = false;
  ids.stream = false;
  const auto one = cl.embed(ids);
  BOOST_REQUIRE_EQUAL(one.size(), 1u);
  BOOST_TEST(one[0].size() == 8u);
  BOOST_TEST(one[0] == g.embed({14990, 1879, 151643}, embedding_options{false, 8}), boost::test_tools::per_element());

  // Prometheus counts their prompt tokens (a generating request's count at its first token).
  int64_t prompt_tokens = 3;  // the id input
  for (const auto& t : r.embed->texts) prompt_tokens += static_cast<int64_t>(qwen3().encode_with_special_tokens(t).size());
  const auto text = srv->metrics().render();
  const auto at = text.find("prompt_tokens_total{");
  BOOST_REQUIRE(at != std::string::npos);
  const auto end = text.find('\n', at);
  BOOST_TEST(std::stoll(text.substr(text.rfind(' ', end) + 1, end - text.rfind(' ', end) - 1)) == prompt_tokens,
             text.substr(at, end - at));

  auto too_wide = ids;
  too_wide.id = "emb-wide";
  too_wide.embed->dimensions = static_cast<int32_t>(full_vocab().config.hidden_size + 1);
  try {
    cl.embed(too_wide);
    BOOST_ERROR("dimensions past hidden_size accepted");
  } catch (const client::request_error& e) {
    BOOST_TEST(std::string(e.what()).find("'dimensions'") != std::string::npos, e.what());
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(text_in_text_out) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  wire::tokenize_request t;
  t.prompt = "Hello world, 你好!";
  BOOST_TEST(cl.tokenize(t) == qwen3().encode("Hello world, 你好!"), boost::test_tools::per_element());

  auto r = text_request("t1", "The capital of France is", 12);
  auto ref = reference_for_text(r);
  auto got = cl.complete(r);
  BOOST_TEST(got.ids == ref, boost::test_tools::per_element());
  BOOST_TEST(got.text == qwen3().decode(ref, /*skip_special_tokens=*/true));
  BOOST_TEST(got.done.usage.prompt_tokens == static_cast<int64_t>(qwen3().encode(r.prompt).size()));
}

BOOST_AUTO_TEST_CASE(stop_strings_and_stop_ids) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  auto base = text_request("s", "Once upon a time", 16);
  auto ref = reference_for_text(base);
  auto full = qwen3().decode(ref, true);
  BOOST_TEST_MESSAGE("reference text: " << full);

  // A stop string taken from the middle of the reference text.
  std::string stop;
  for (size_t i = 4; i < ref.size() && stop.empty(); ++i) {
    auto piece = qwen3().decode(std::vector<int32_t>{ref[i]}, true);
    if (piece.size() >= 2 && full.find(piece) != std::string::npos) stop = piece;
  }
  BOOST_REQUIRE(!stop.empty());
  auto r = base;
  r.id = "s1";
  r.stop = {stop};
  auto got = cl.complete(r);
  BOOST_TEST((got.done.reason == wire::finish_reason::stop));
  BOOST_TEST(got.text == full.substr(0, full.find(stop)));
  BOOST_TEST(got.ids.size() < ref.size());
  // vLLM's include_stop_str_in_output: the same stop, the text ending with it.
  r.id = "s1b";
  r.include_stop_str_in_output = true;
  auto with = cl.complete(r);
  BOOST_TEST((with.done.reason == wire::finish_reason::stop));
  BOOST_TEST(with.text == full.substr(0, full.find(stop) + stop.size()));
  BOOST_TEST(with.ids == got.ids, boost::test_tools::per_element());

  auto r2 = base;
  r2.id = "s2";
  r2.stop_ids = {ref[5]};
  auto got2 = cl.complete(r2);
  BOOST_TEST((got2.done.reason == wire::finish_reason::stop));
  auto first = static_cast<size_t>(std::find(ref.begin(), ref.end(), ref[5]) - ref.begin());
  BOOST_TEST(got2.ids == std::vector<int32_t>(ref.begin(), ref.begin() + static_cast<long>(first) + 1),
             boost::test_tools::per_element());
}

// vLLM's skip_special_tokens: an output held to special tokens (allowed_token_ids) has no text by
// default, and their text with skip_special_tokens false; the ids are the same either way.
BOOST_AUTO_TEST_CASE(special_tokens_are_text_only_when_asked) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  auto r = text_request("sp", "Once upon a time", 6);
  r.allowed_token_ids = {*qwen3().token_to_id("<|im_start|>"), *qwen3().token_to_id("<|im_end|>")};
  r.ignore_eos = true;
  const auto skipped = cl.complete(r);
  BOOST_TEST_REQUIRE(skipped.ids.size() == 6u);
  BOOST_TEST(skipped.text == "");
  r.id = "sp2";
  r.skip_special_tokens = false;
  const auto kept = cl.complete(r);
  BOOST_TEST(kept.ids == skipped.ids, boost::test_tools::per_element());
  BOOST_TEST(kept.text == qwen3().decode(kept.ids));
  BOOST_TEST(kept.text.find("<|im_") == 0u);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(chat_messages_use_the_model_chat_template) {
  // The first reference case of tests/data/chat_template/cases.jsonl (system + user, generation
  // prompt, thinking left at its default).
  std::vector<wire::chat_message> msgs = {{"system", "You are a helpful assistant.", "", ""},
                                          {"user", "Hello! Who are you?", "", ""}};
  std::vector<int32_t> expected = {151644, 8948, 198, 2610, 525,    264, 10950, 17847, 13,     151645, 198, 151644, 872,
                                   198,    9707, 0,   10479, 525,   498, 30,    151645, 198,   151644, 77091,  198};
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  wire::tokenize_request t;
  t.kind = wire::prompt_kind::messages;
  t.messages = msgs;
  BOOST_TEST(cl.tokenize(t) == expected, boost::test_tools::per_element());

  wire::generate_request r;
  r.id = "chat";
  r.kind = wire::prompt_kind::messages;
  r.messages = msgs;
  r.max_tokens = 6;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0;
  auto got = cl.complete(r);
  BOOST_TEST(got.done.usage.prompt_tokens == static_cast<int64_t>(expected.size()));
  auto ids = r;
  ids.kind = wire::prompt_kind::ids;
  ids.prompt_ids = expected;
  BOOST_TEST(got.ids == reference(full_vocab(), ids), boost::test_tools::per_element());

  // enable_thinking = false adds the empty think block, as the template says.
  r.id = "chat2";
  r.enable_thinking = false;
  auto got2 = cl.complete(r);
  BOOST_TEST(got2.done.usage.prompt_tokens > static_cast<int64_t>(expected.size()));
}

// Tools over the wire: the reference conversation with a tool definition, a tool call and its
// response (tests/data/chat_template) tokenizes to the reference ids, and a generate with it
// prefills exactly those tokens.
BOOST_AUTO_TEST_CASE(chat_with_tools_uses_the_model_chat_template) {
  std::ifstream in(TROUPE_TEST_DATA_DIR "/chat_template/cases.jsonl");
  nlohmann::ordered_json c;
  for (std::string line; std::getline(in, line);)
    if (auto j = nlohmann::ordered_json::parse(line); j["name"] == "tool_response_user_message") c = j;
  BOOST_REQUIRE(c.is_object());
  wire::tokenize_request t;
  t.kind = wire::prompt_kind::messages;
  for (const auto& m : c["messages"]) {
    wire::chat_message w{m["role"].get<std::string>(), m["content"].get<std::string>(), "", ""};
    if (m.contains("tool_calls")) w.tool_calls_json = m["tool_calls"].dump();
    t.messages.push_back(std::move(w));
  }
  t.tools_json = c["tools"].dump();
  const auto expected = c["ids"].get<std::vector<int32_t>>();
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  BOOST_TEST(cl.tokenize(t) == expected, boost::test_tools::per_element());
  wire::generate_request r;
  r.id = "tools";
  r.kind = wire::prompt_kind::messages;
  r.messages = t.messages;
  r.tools_json = t.tools_json;
  r.max_tokens = 3;
  r.sampling.temperature = 0.0;
  auto got = cl.complete(r);
  BOOST_TEST(got.done.usage.prompt_tokens == static_cast<int64_t>(expected.size()));
  BOOST_TEST(got.done.tool_calls.empty());  // random weights call nothing; the parser is tested in serve
}

// Logprobs over the wire equal log_softmax of the logits `troupe logits` computes for the same
// tokens (the model's own distribution, before temperature), streamed and not.
BOOST_AUTO_TEST_CASE(logprobs_are_the_model_distribution) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  wire::generate_request r;
  r.kind = wire::prompt_kind::ids;
  r.prompt_ids = {9707, 11, 1879, 0, 3555};
  r.max_tokens = 4;
  r.ignore_eos = true;
  r.sampling.temperature = 0.7;
  r.sampling.seed = 11;
  r.logprobs = 3;
  for (bool stream : {true, false}) {
    r.id = stream ? "lp-stream" : "lp-once";
    r.stream = stream;
    auto got = cl.complete(r);
    BOOST_REQUIRE_EQUAL(got.ids.size(), 4u);
    BOOST_REQUIRE_EQUAL(got.logprobs.size(), 4u);
    std::vector<int32_t> seq = r.prompt_ids;
    seq.insert(seq.end(), got.ids.begin(), got.ids.end() - 1);
    generator gen(full_vocab());
    const auto logits = gen.prompt_logits(seq);
    const int64_t vocab = full_vocab().config.vocab_size;
    for (size_t t = 0; t < got.ids.size(); ++t) {
      const float* row = logits.data() + (r.prompt_ids.size() - 1 + t) * vocab;
      double m = row[0], z = 0;
      for (int64_t i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(row[i]));
      for (int64_t i = 0; i < vocab; ++i) z += std::exp(row[i] - m);
      const double log_z = m + std::log(z);
      const auto& lp = got.logprobs[t];
      BOOST_TEST(std::abs(lp.logprob - (row[got.ids[t]] - log_z)) < 1e-4, "token " << t << ": " << lp.logprob);
      BOOST_REQUIRE_EQUAL(lp.top.size(), 3u);
      for (const auto& [id, v] : lp.top) BOOST_TEST(std::abs(v - (row[id] - log_z)) < 1e-4);
      BOOST_TEST(lp.top[0].first == std::max_element(row, row + vocab) - row);
    }
  }
  // Without the field, no logprobs.
  r.logprobs.reset();
  r.id = "lp-none";
  BOOST_TEST(cl.complete(r).logprobs.empty());
}

// min_tokens, allowed_token_ids and logit_bias over the wire, on a greedy decode whose first
// token is made a stop id.
BOOST_AUTO_TEST_CASE(token_rules_shape_the_output) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  wire::generate_request r;
  r.id = "plain";
  r.kind = wire::prompt_kind::ids;
  r.prompt_ids = {9707, 11, 1879};
  r.max_tokens = 6;
  r.sampling.temperature = 0.0;
  r.ignore_eos = true;
  const auto plain = cl.complete(r).ids;
  BOOST_REQUIRE_EQUAL(plain.size(), 6u);
  // The first greedy token as a stop id ends the request at once ...
  r.id = "stopped";
  r.stop_ids = {plain[0]};
  auto got = cl.complete(r);
  BOOST_TEST(got.ids.size() == 1u);
  BOOST_TEST((got.done.reason == wire::finish_reason::stop));
  // ... unless min_tokens holds it back: then the first 4 tokens are anything else.
  r.id = "min4";
  r.min_tokens = 4;
  got = cl.complete(r);
  BOOST_REQUIRE(got.ids.size() >= 4u);
  for (size_t i = 0; i < 4; ++i) BOOST_TEST(got.ids[i] != plain[0]);
  r.min_tokens.reset();
  r.stop_ids.clear();
  // Only the allowed ids come, sampled too.
  r.id = "allowed";
  r.allowed_token_ids = {plain[1], 500, 600};
  r.sampling.temperature = 1.0;
  r.sampling.seed = 3;
  for (int32_t id : cl.complete(r).ids) BOOST_TEST((id == plain[1] || id == 500 || id == 600), id);
  r.allowed_token_ids.clear();
  // +100 on one id makes it the greedy choice every time; -100 on the greedy first token moves it.
  r.id = "bias";
  r.sampling.temperature = 0.0;
  r.logit_bias = {{12345, 100.0}};
  BOOST_TEST(cl.complete(r).ids == std::vector<int32_t>(6, 12345), boost::test_tools::per_element());
  r.logit_bias = {{plain[0], -100.0}};
  BOOST_TEST(cl.complete(r).ids.at(0) != plain[0]);
  // bad_words: a token of the greedy output whose text tokenizes back to it, as a word, never
  // comes again (a one-token word is banned everywhere).
  r.logit_bias.clear();
  r.id = "bad-words";
  std::optional<int32_t> word_id;
  for (int32_t id : plain) {
    const auto text = qwen3().decode(std::vector<int32_t>{id});
    if (text.find_first_not_of(" \t\n\r\f\v") == 0 && qwen3().encode(text) == std::vector<int32_t>{id}) {
      word_id = id;
      r.bad_words = {text};
      break;
    }
  }
  BOOST_REQUIRE(word_id.has_value());
  got = cl.complete(r);
  BOOST_TEST(got.ids.size() == 6u);
  BOOST_TEST(std::count(got.ids.begin(), got.ids.end(), *word_id) == 0);
  BOOST_TEST((got.ids != plain));
  r.bad_words.clear();
  // Refused with the field named.
  r.id = "bad";
  r.logit_bias = {{151936, 1.0}};
  BOOST_CHECK_EXCEPTION(cl.complete(r), client::request_error, [](const client::request_error& e) {
    return std::string(e.what()).find("logit_bias") != std::string::npos;
  });
}

// prompt_logprobs over the wire: each prompt token's log-probability given the ones before it
// equals log_softmax of the logits `troupe logits` computes, streamed or not. The prompt is
// computed in full though the prefix cache holds it (a cached block has no logits), and what it
// computed serves a later plain request from the cache.
BOOST_AUTO_TEST_CASE(prompt_logprobs_are_the_prompt_distribution) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  wire::generate_request r;
  r.kind = wire::prompt_kind::ids;
  for (int32_t i = 0; i < 40; ++i) r.prompt_ids.push_back(100 + 37 * i);
  r.max_tokens = 2;
  r.sampling.temperature = 0.0;
  r.prompt_logprobs = 2;
  generator gen(full_vocab());
  const auto logits = gen.prompt_logits(r.prompt_ids);
  const int64_t vocab = full_vocab().config.vocab_size;
  for (bool stream : {true, false, true}) {
    r.id = stream ? "pl-stream" : "pl-once";
    r.stream = stream;
    const auto got = cl.complete(r);
    BOOST_TEST(got.done.usage.cached_prompt_tokens == 0);
    BOOST_REQUIRE(got.done.prompt_logprobs.has_value());
    const auto& pl = *got.done.prompt_logprobs;
    BOOST_REQUIRE_EQUAL(pl.size(), r.prompt_ids.size() - 1);
    for (size_t p = 1; p < r.prompt_ids.size(); ++p) {
      const float* row = logits.data() + (p - 1) * vocab;
      double m = row[0], z = 0;
      for (int64_t i = 0; i < vocab; ++i) m = std::max(m, static_cast<double>(row[i]));
      for (int64_t i = 0; i < vocab; ++i) z += std::exp(row[i] - m);
      const double log_z = m + std::log(z);
      BOOST_TEST(std::abs(pl[p - 1].logprob - (row[r.prompt_ids[p]] - log_z)) < 1e-4, "position " << p);
      BOOST_REQUIRE_EQUAL(pl[p - 1].top.size(), 2u);
      BOOST_TEST(pl[p - 1].top[0].first == std::max_element(row, row + vocab) - row);
    }
  }
  r.id = "plain";
  r.prompt_logprobs.reset();
  const auto plain = cl.complete(r);
  BOOST_TEST(!plain.done.prompt_logprobs.has_value());
  BOOST_TEST(plain.done.usage.cached_prompt_tokens > 0);
}

// separate_reasoning over the wire: the same seeded output as without it, split as
// reasoning_split splits it, the server finding on its own that a prompt ending in "<think>\n"
// opened the block (so random tokens are all thinking) and that a plain prompt did not.
BOOST_AUTO_TEST_CASE(separate_reasoning_splits_the_same_output) {
  auto srv = start(test_config(), full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  for (bool opened : {true, false}) {
    auto r = text_request("", opened ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n", 12);
    r.sampling.temperature = 0.8;
    r.sampling.seed = 5;
    r.id = "plain";
    const auto plain = cl.complete(r);
    BOOST_TEST(plain.reasoning.empty());
    serve::reasoning_split expect(opened);
    auto a = expect.push(plain.text), b = expect.finish();
    for (bool stream : {true, false}) {
      r.id = stream ? "split-stream" : "split-once";
      r.stream = stream;
      r.separate_reasoning = true;
      const auto got = cl.complete(r);
      BOOST_TEST(got.ids == plain.ids, boost::test_tools::per_element());
      BOOST_TEST(got.reasoning == a.reasoning + b.reasoning);
      BOOST_TEST(got.text == a.content + b.content);
      if (opened) BOOST_TEST(!got.reasoning.empty());
    }
  }
}

// thinking_token_budget over the wire: after a prompt that opened the think block, the first
// `budget` tokens are the model's own (the same as without a budget), then </think> comes, and the
// answer after it is split off as text; the same with speculative drafts and with n = 2 (each
// completion counts its own thinking).
BOOST_AUTO_TEST_CASE(a_thinking_budget_ends_the_thinking) {
  auto cfg = test_config();
  cfg.num_speculative_tokens = 3;  // the forced token is verified like any other
  auto srv = start(cfg, full_vocab_dir, tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  tokenizer tok(tokenizer_dir);
  const int32_t end = *tok.token_to_id("</think>");
  auto r = text_request("free", "<|im_start|>assistant\n<think>\n", 12);
  r.sampling.temperature = 0.8;
  r.sampling.seed = 11;
  const auto free = cl.complete(r);
  BOOST_TEST_REQUIRE(free.ids.size() == 12u);
  BOOST_TEST_REQUIRE(std::count(free.ids.begin(), free.ids.begin() + 5, end) == 0);  // no thinking of its own ends early
  for (int32_t budget : {0, 5}) {
    r.id = "budget" + std::to_string(budget);
    r.thinking_token_budget = budget;
    r.separate_reasoning = true;
    r.n = 2;
    const auto got = cl.complete_all(r);
    BOOST_TEST_REQUIRE(got.size() == 2u);
    for (size_t i = 0; i < got.size(); ++i) {
      const auto& c = got[i];
      BOOST_TEST_REQUIRE(c.ids.size() == 12u);
      const auto b = static_cast<size_t>(budget);
      if (i == 0)  // completion 0 samples with the request's seed: the free run's tokens
        BOOST_TEST(std::vector<int32_t>(c.ids.begin(), c.ids.begin() + budget) ==
                       std::vector<int32_t>(free.ids.begin(), free.ids.begin() + budget),
                   boost::test_tools::per_element());
      BOOST_TEST(c.ids[b] == end);
      BOOST_TEST(std::count(c.ids.begin(), c.ids.end(), end) >= 1);
      BOOST_TEST(!c.text.empty());  // the answer after </think>
    }
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_SUITE_END()
