// Request building: defaults from generation_config.json exactly as `troupe generate` takes them,
// EOS and request stop ids, and the refusals (vocabulary, prompt length, no tokenizer).
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/serve/chat_renderer.hpp"
#include "runtime/serve/request_builder.hpp"

using namespace troupe;
using namespace troupe::serve;

namespace {
model_facts tiny() {
  model_facts m;
  m.name = "tiny";
  m.vocab_size = 4096;
  m.max_model_len = 16;
  m.default_max_tokens = 5;
  m.generation.do_sample = true;
  m.generation.temperature = 0.6f;
  m.generation.top_k = 20;
  m.generation.top_p = 0.95f;
  m.generation.eos_token_ids = {4095, 4094};
  return m;
}
wire::generate_request ids(std::vector<int32_t> p) {
  wire::generate_request r;
  r.id = "r";
  r.kind = wire::prompt_kind::ids;
  r.prompt_ids = std::move(p);
  return r;
}
// tiny() serving Qwen3's vocabulary with its tokenizer.
model_facts with_tokenizer(const tokenizer& tok) {
  model_facts m = tiny();
  m.vocab_size = 151936;
  m.max_model_len = 100;
  m.tok = &tok;
  return m;
}

wire::generate_request ids_req_with_bad_words() {
  auto r = ids({1});
  r.bad_words = {"Paris"};
  return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(request_builder_suite)

BOOST_AUTO_TEST_CASE(defaults_come_from_the_model) {
  auto b = build_generate(ids({1, 2, 3}), tiny());
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->prompt == (std::vector<int32_t>{1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(b.req->sampling.temperature == 0.6f);
  BOOST_TEST(b.req->sampling.top_k == 20);
  BOOST_TEST(b.req->sampling.top_p == 0.95f);
  BOOST_TEST(!b.req->sampling.has_seed);
  BOOST_TEST(b.req->max_tokens == 5);
  BOOST_TEST(b.req->stop_ids == (std::vector<int32_t>{4095, 4094}), boost::test_tools::per_element());
}

// generation_config's max_new_tokens caps every request's output, asked for or defaulted (vLLM's).
BOOST_AUTO_TEST_CASE(max_new_tokens_caps_every_request) {
  auto m = tiny();
  m.generation.max_new_tokens = 4;
  auto r = ids({1});
  BOOST_TEST(build_generate(r, m).req->max_tokens == 4);  // the default 5, capped
  r.max_tokens = 9;
  BOOST_TEST(build_generate(r, m).req->max_tokens == 4);
  r.max_tokens = 2;
  BOOST_TEST(build_generate(r, m).req->max_tokens == 2);
  r.max_tokens = 9;
  m.generation.max_new_tokens = 0;  // none
  BOOST_TEST(build_generate(r, m).req->max_tokens == 9);
}

BOOST_AUTO_TEST_CASE(request_fields_override) {
  auto r = ids({1});
  r.sampling.temperature = 0.0;
  r.sampling.seed = 42;
  r.max_tokens = 9;
  r.stop_ids = {7, 4095};
  auto b = build_generate(r, tiny());
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->sampling.temperature == 0.0f);
  BOOST_TEST(b.req->sampling.has_seed);
  BOOST_TEST(b.req->sampling.seed == 42u);
  BOOST_TEST(b.req->max_tokens == 9);
  BOOST_TEST(b.req->stop_ids == (std::vector<int32_t>{4095, 4094, 7}), boost::test_tools::per_element());
  r.ignore_eos = true;
  b = build_generate(r, tiny());
  BOOST_TEST(b.req->stop_ids == (std::vector<int32_t>{7, 4095}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(refusals) {
  auto b = build_generate(ids({1, 4096}), tiny());
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message == "field 'prompt_ids[1]' = 4096 is outside the vocabulary (size 4096)");
  b = build_generate(ids(std::vector<int32_t>(16, 1)), tiny());
  BOOST_TEST(to_string(b.error.code) == "prompt_too_long");
  BOOST_TEST(b.error.message == "prompt has 16 tokens; max_model_len is 16 (the prompt and at least one generated token must fit)");
  BOOST_TEST(build_generate(ids(std::vector<int32_t>(15, 1)), tiny()).req.has_value());
  auto r = ids({1});
  r.stop_ids = {5000};
  BOOST_TEST(build_generate(r, tiny()).error.message == "field 'stop_ids[0]' = 5000 is outside the vocabulary (size 4096)");
  wire::generate_request t;
  t.kind = wire::prompt_kind::text;
  t.prompt = "hi";
  b = build_generate(t, tiny());
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'tiny' is served without a tokenizer: send 'prompt_ids'");
  r = ids({1});
  r.separate_reasoning = true;
  b = build_generate(r, tiny());
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "field 'separate_reasoning' needs output text; model 'tiny' is served without a tokenizer");
}

// truncate_prompt_tokens: the last k tokens of the prompt (of each embed input); -1 as many as fit
// (max_model_len - 1); k past max_model_len refused.
BOOST_AUTO_TEST_CASE(truncation_keeps_the_prompts_last_tokens) {
  std::vector<int32_t> prompt(20);
  for (int32_t i = 0; i < 20; ++i) prompt[static_cast<size_t>(i)] = i + 1;
  auto r = ids(prompt);
  r.truncate_prompt_tokens = 4;
  auto b = build_generate(r, tiny());
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->prompt == (std::vector<int32_t>{17, 18, 19, 20}), boost::test_tools::per_element());
  r.truncate_prompt_tokens = -1;  // tiny(): max_model_len 16
  b = build_generate(r, tiny());
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->prompt == std::vector<int32_t>(prompt.end() - 15, prompt.end()), boost::test_tools::per_element());
  r.truncate_prompt_tokens = 17;
  b = build_generate(r, tiny());
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message == "field 'truncate_prompt_tokens' (17) exceeds max_model_len (16)");
  r.truncate_prompt_tokens = 16;  // allowed, and the prompt then leaves no room: refused as too long
  BOOST_TEST(to_string(build_generate(r, tiny()).error.code) == "prompt_too_long");
  wire::generate_request e;
  e.embed = wire::embed_fields{{}, {prompt, {5, 6}}, std::nullopt, true};
  e.truncate_prompt_tokens = 3;
  auto m = tiny();
  m.hidden_size = 8;
  auto eb = build_embed(e, m);
  BOOST_REQUIRE_MESSAGE(eb.req, eb.error.message);
  BOOST_TEST(eb.req->prompts[0] == (std::vector<int32_t>{18, 19, 20}), boost::test_tools::per_element());
  BOOST_TEST(eb.req->prompts[1] == (std::vector<int32_t>{5, 6}), boost::test_tools::per_element());
}

// A batch (build_generates): each prompt built as the request's only one, text or ids, with the
// request's other fields; a refused prompt refuses the batch and is named.
BOOST_AUTO_TEST_CASE(a_batch_builds_each_prompt_as_alone) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  const auto m = with_tokenizer(tok);
  wire::generate_request r;
  r.prompts = {{wire::prompt_kind::text, "Hello world", {}}, {wire::prompt_kind::ids, "", {7, 8, 9}}};
  r.max_tokens = 3;
  r.sampling.seed = 5;
  auto b = build_generates(r, m);
  BOOST_REQUIRE(!b.error);
  BOOST_REQUIRE_EQUAL(b.reqs.size(), 2u);
  for (size_t p = 0; p < 2; ++p) {
    auto alone = r;
    alone.prompts.clear();
    alone.kind = r.prompts[p].kind;
    alone.prompt = r.prompts[p].text;
    alone.prompt_ids = r.prompts[p].ids;
    auto want = build_generate(alone, m);
    BOOST_REQUIRE(want.req);
    BOOST_TEST(b.reqs[p].prompt == want.req->prompt, boost::test_tools::per_element());
    BOOST_TEST(b.reqs[p].max_tokens == 3);
    BOOST_TEST(b.reqs[p].sampling.seed == 5u);
  }
  BOOST_TEST(b.reqs[0].prompt == tok.encode("Hello world"), boost::test_tools::per_element());
  // One request, one prompt: build_generate's.
  auto one = build_generates(ids({1, 2}), tiny());
  BOOST_REQUIRE_EQUAL(one.reqs.size(), 1u);
  BOOST_TEST(one.reqs[0].prompt == (std::vector<int32_t>{1, 2}), boost::test_tools::per_element());
  r.prompts.push_back({wire::prompt_kind::ids, "", std::vector<int32_t>(100, 1)});
  b = build_generates(r, m);
  BOOST_REQUIRE(b.error);
  BOOST_TEST(b.reqs.empty());
  BOOST_TEST(to_string(b.error->code) == "prompt_too_long");
  BOOST_TEST(b.error->message.find("prompts[2]: prompt has 100 tokens") == 0u, b.error->message);
}

// Embed requests (build_embed): each input a prompt, the options carried; each refusal names the
// input or field: ids outside the vocabulary, an input over max_model_len, text without a
// tokenizer, dimensions past the hidden size.
BOOST_AUTO_TEST_CASE(embed_requests_and_their_refusals) {
  auto m = tiny();
  m.hidden_size = 64;
  wire::generate_request r;
  r.id = "e";
  r.embed.emplace();
  r.embed->ids = {{1, 2}, {3}};
  r.embed->dimensions = 8;
  r.embed->normalize = false;
  r.n = 2;
  auto b = build_embed(r, m);
  BOOST_REQUIRE(b.req.has_value());
  BOOST_TEST((b.req->prompts == std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  BOOST_TEST(b.req->options.dimensions == 8);
  BOOST_TEST(!b.req->options.normalize);
  auto bad = r;
  bad.embed->ids = {{1}, {2, 4096}};
  b = build_embed(bad, m);
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message == "field 'input[1][1]' = 4096 is outside the vocabulary (size 4096)");
  bad = r;
  bad.embed->ids = {std::vector<int32_t>(16, 1)};
  bad.n = 1;
  b = build_embed(bad, m);
  BOOST_TEST(to_string(b.error.code) == "prompt_too_long");
  BOOST_TEST(b.error.message == "field 'input' has 16 tokens; max_model_len is 16");
  bad = r;
  bad.embed->dimensions = 65;
  b = build_embed(bad, m);
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message == "field 'dimensions' (65) exceeds model 'tiny''s hidden_size (64)");
  bad = r;
  bad.embed->ids.clear();
  bad.embed->texts = {"hi"};
  bad.n = 1;
  b = build_embed(bad, m);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'tiny' is served without a tokenizer: give 'input' as token ids");
}

// A tokenizer larger than the model (its added tokens past the vocabulary): a text that encodes to
// such an id is refused at building, naming the field, for generate and embed alike (the step would
// refuse the whole batch, other requests' sequences with it).
BOOST_AUTO_TEST_CASE(texts_encoding_past_the_vocabulary_are_refused) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto m = with_tokenizer(tok);
  m.vocab_size = 151643;  // every ordinary token, none of the added ones
  wire::generate_request t;
  t.kind = wire::prompt_kind::text;
  t.prompt = "plain words";
  BOOST_TEST(build_generate(t, m).req.has_value());
  t.prompt = "<|im_start|>user";
  auto b = build_generate(t, m);
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message == "field 'prompt' encodes to token id 151644 (token 0), outside model 'tiny''s vocabulary "
                                "(size 151643): the tokenizer is larger than the model");
  wire::generate_request e;
  e.embed.emplace();
  e.embed->texts = {"fine", "x<|endoftext|>"};
  e.n = 2;
  m.hidden_size = 8;
  auto eb = build_embed(e, m);
  BOOST_TEST(to_string(eb.error.code) == "invalid_value");
  BOOST_TEST(eb.error.message.find("field 'input[1]' encodes to token id 151643 (token 1)") == 0u, eb.error.message);
}

// A model without lm_head (an embedding model) builds embed requests and refuses generation.
BOOST_AUTO_TEST_CASE(an_embedding_model_refuses_generation) {
  auto m = tiny();
  m.hidden_size = 64;
  m.embedding_only = true;
  auto b = build_generate(ids({1, 2}), m);
  BOOST_TEST(!b.req.has_value());
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'tiny' is an embedding model (its checkpoint has no lm_head.weight): it serves "
                                "embed requests (POST /v1/embeddings), not generation");
  wire::generate_request e;
  e.embed.emplace();
  e.embed->ids = {{1, 2}};
  BOOST_TEST(build_embed(e, m).req.has_value());
}

BOOST_AUTO_TEST_CASE(token_rules_reach_the_sampler) {
  auto r = ids({1});
  r.max_tokens = 5;
  r.min_tokens = 2;
  r.stop_ids = {9};
  r.allowed_token_ids = {3, 4095};
  r.logit_bias = {{7, -1.5}};
  auto b = build_generate(r, tiny());
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->min_tokens == 2);
  BOOST_TEST(b.req->sampling.min_tokens == 2);
  // The ids min_tokens holds back are every stop id: EOS (4095, 4094) and the request's.
  BOOST_TEST((b.req->sampling.min_tokens_stop_ids == std::vector<int32_t>{4095, 4094, 9}));
  BOOST_TEST((b.req->sampling.allowed_token_ids == std::vector<int32_t>{3, 4095}));
  BOOST_TEST(b.req->sampling.logit_bias.size() == 1u);
  BOOST_TEST(b.req->sampling.logit_bias[0].second == -1.5f);
  // With ignore_eos, EOS is no stop and not held back either.
  r.ignore_eos = true;
  BOOST_TEST((build_generate(r, tiny()).req->sampling.min_tokens_stop_ids == std::vector<int32_t>{9}));
  // Refusals.
  r.min_tokens = 6;
  BOOST_TEST(build_generate(r, tiny()).error.message == "field 'min_tokens' = 6 is more than max_tokens (5)");
  r.min_tokens = 5;
  BOOST_TEST(build_generate(r, tiny()).req.has_value());
  r.allowed_token_ids = {3, 4096};
  BOOST_TEST(build_generate(r, tiny()).error.message == "field 'allowed_token_ids[1]' = 4096 is outside the vocabulary (size 4096)");
  r.allowed_token_ids = {};
  r.logit_bias = {{4096, 1.0}};
  BOOST_TEST(build_generate(r, tiny()).error.message == "field 'logit_bias' = 4096 is outside the vocabulary (size 4096)");
}

// vLLM's bad_words tokenization: the word without leading whitespace, and its form after a space
// when that starts with another token and has as many.
BOOST_AUTO_TEST_CASE(bad_words_become_token_sequences) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  const auto ids = bad_words_ids(tok, {"  Paris", "hello world"});
  const auto paris = tok.encode("Paris"), spaced = tok.encode(" Paris");
  BOOST_REQUIRE(paris.size() == spaced.size());  // both one token in Qwen3's vocabulary
  BOOST_TEST(paris != spaced);
  BOOST_REQUIRE_EQUAL(ids.size(), 4u);
  BOOST_TEST(ids[0] == paris, boost::test_tools::per_element());
  BOOST_TEST(ids[1] == spaced, boost::test_tools::per_element());
  BOOST_TEST(ids[2] == tok.encode("hello world"), boost::test_tools::per_element());
  BOOST_TEST(ids[3] == tok.encode(" hello world"), boost::test_tools::per_element());
  // Through the request: refused without a tokenizer, tokenized with one.
  auto r = ids_req_with_bad_words();
  BOOST_TEST(to_string(build_generate(r, tiny()).error.code) == "unsupported");
  auto b = build_generate(r, with_tokenizer(tok));
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->sampling.bad_words_ids.size() == 2u);
}

BOOST_AUTO_TEST_CASE(separate_reasoning_notes_whether_the_prompt_opened_a_think_block) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto m = with_tokenizer(tok);
  auto r = ids(tok.encode("<|im_start|>assistant\n<think>\n"));
  BOOST_TEST(!build_generate(r, m).req->reasoning_opened_in_prompt.has_value());  // not asked
  r.separate_reasoning = true;
  BOOST_TEST(build_generate(r, m).req->reasoning_opened_in_prompt.value_or(false));
  r = ids(tok.encode("<|im_start|>assistant\n"));
  r.separate_reasoning = true;
  BOOST_TEST(!build_generate(r, m).req->reasoning_opened_in_prompt.value_or(true));
}

BOOST_AUTO_TEST_CASE(text_prompts_with_a_tokenizer) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto m = with_tokenizer(tok);
  wire::generate_request t;
  t.kind = wire::prompt_kind::text;
  t.prompt = "Hello world";
  auto b = build_generate(t, m);
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->prompt == tok.encode("Hello world"), boost::test_tools::per_element());
  t.kind = wire::prompt_kind::messages;
  t.messages = {{"user", "hi", "", ""}};
  b = build_generate(t, m);
  BOOST_TEST(to_string(b.error.code) == "unsupported");  // no chat renderer given
  m.chat = [](const std::vector<wire::chat_message>& msgs, const std::string&, const chat_options& o) {
    return "<|im_start|>user\n" + msgs[0].content + "<|im_end|>\n<|im_start|>assistant\n" +
           (o.enable_thinking ? "" : "<think>\n\n</think>\n\n");
  };
  t.enable_thinking = false;
  b = build_generate(t, m);
  BOOST_REQUIRE(b.req);
  BOOST_TEST(b.req->prompt == tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
             boost::test_tools::per_element());
}

// chat_template_kwargs: the template's variables are the server's defaults, then the request's
// kwargs over them, then enable_thinking (the request's, else the server's default).
BOOST_AUTO_TEST_CASE(template_kwargs_reach_the_template) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto m = with_tokenizer(tok);
  auto tmpl = std::make_shared<const chat_template>(
      "{{ greeting }} {{ name | default('nobody') }} {{ enable_thinking }}: {{ messages[0].content }}");
  const auto defaults = parse_template_defaults(R"({"greeting": "Hello", "enable_thinking": false})");
  BOOST_TEST(!defaults.enable_thinking);
  m.chat = make_chat_renderer(tmpl, defaults.kwargs);
  m.default_enable_thinking = defaults.enable_thinking;
  m.max_model_len = 1000;
  wire::generate_request r;
  r.id = "r";
  r.kind = wire::prompt_kind::messages;
  r.messages = {{"user", "hi", "", ""}};
  auto text_of = [&](const wire::generate_request& q) {
    auto b = build_generate(q, m);
    BOOST_REQUIRE_MESSAGE(b.req, b.error.message);
    return tok.decode(b.req->prompt);
  };
  BOOST_TEST(text_of(r) == "Hello nobody False: hi");
  r.template_kwargs_json = R"({"greeting": "Hi", "name": "Ann"})";
  r.enable_thinking = true;
  BOOST_TEST(text_of(r) == "Hi Ann True: hi");
  // Bad defaults stop the start, naming the setting.
  for (const char* bad : {"[1]", R"({"enable_thinking": "no"})", R"({"messages": []})", "{"}) {
    BOOST_CHECK_EXCEPTION(parse_template_defaults(bad), troupe::error, [](const troupe::error& e) {
      return std::string(e.what()).find("default_chat_template_kwargs") != std::string::npos;
    });
  }
  BOOST_TEST(parse_template_defaults("").kwargs.empty());
}

// A request's own chat_template: refused unless the server trusts them; then rendered (compiled
// once, kept) with the server's variables; one outside the Jinja subset is refused naming it.
BOOST_AUTO_TEST_CASE(a_requests_own_template_needs_trust) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto m = with_tokenizer(tok);
  m.max_model_len = 1000;
  m.chat = make_chat_renderer(std::make_shared<const chat_template>("server: {{ messages[0].content }}",
                                                                    nlohmann::ordered_json{{"eos_token", "<|im_end|>"}}),
                              nlohmann::ordered_json{{"greeting", "Hey"}});
  wire::generate_request r;
  r.id = "r";
  r.kind = wire::prompt_kind::messages;
  r.messages = {{"user", "hi", "", ""}};
  r.chat_template = "{{ greeting }} own: {{ messages[0].content }}{{ eos_token }}";
  auto b = build_generate(r, m);
  BOOST_TEST(!b.req);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message.find("--trust-request-chat-template") != std::string::npos, b.error.message);
  m.trust_request_chat_template = true;
  for (int twice = 0; twice < 2; ++twice) {
    b = build_generate(r, m);
    BOOST_REQUIRE_MESSAGE(b.req, b.error.message);
    BOOST_TEST(tok.decode(b.req->prompt) == "Hey own: hi<|im_end|>");
  }
  r.chat_template.clear();
  BOOST_TEST(tok.decode(build_generate(r, m).req->prompt) == "server: hi");
  r.chat_template = "{% macro x() %}";
  b = build_generate(r, m);
  BOOST_TEST(!b.req);
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message.rfind("field 'chat_template'", 0) == 0, b.error.message);
}

// thinking_token_budget: the sampler gets the budget with Qwen3's think ids, and whether the
// prompt opened the block; -1 is none; a model without a tokenizer (no think ids) refuses it.
BOOST_AUTO_TEST_CASE(a_thinking_budget_reaches_the_sampler) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto m = with_tokenizer(tok);
  const int32_t think = *tok.token_to_id("<think>"), end = *tok.token_to_id("</think>");
  auto r = ids(tok.encode("<|im_start|>assistant\n"));
  r.thinking_token_budget = 7;
  auto b = build_generate(r, m);
  BOOST_REQUIRE_MESSAGE(b.req, b.error.message);
  BOOST_TEST(b.req->sampling.thinking_token_budget == 7);
  BOOST_TEST(b.req->sampling.think_start_id == think);
  BOOST_TEST(b.req->sampling.think_end_id == end);
  BOOST_TEST(!b.req->sampling.thinking_opened_in_prompt);
  r = ids(tok.encode("<|im_start|>assistant\n<think>\n"));
  r.thinking_token_budget = 0;
  b = build_generate(r, m);
  BOOST_REQUIRE_MESSAGE(b.req, b.error.message);
  BOOST_TEST(b.req->sampling.thinking_opened_in_prompt);
  r.thinking_token_budget = -1;
  BOOST_TEST(build_generate(r, m).req->sampling.thinking_token_budget == -1);
  auto bare = ids({1, 2});
  bare.thinking_token_budget = 5;
  b = build_generate(bare, tiny());
  BOOST_TEST(!b.req);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message.find("thinking_token_budget") != std::string::npos, b.error.message);
}

// OpenAI Responses' truncation "auto": the fewest oldest turns are dropped for the prompt to fit,
// the system message kept and the conversation starting at a user message (a tool result stays
// with its call); without it, or when the last turn alone is too long, the prompt is refused.
BOOST_AUTO_TEST_CASE(truncate_messages_drops_the_oldest_turns_that_do_not_fit) {
  tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto tmpl = std::make_shared<const chat_template>(chat_template::from_directory(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer"));
  auto m = with_tokenizer(tok);
  m.chat = make_chat_renderer(tmpl);
  const std::string calls = R"([{"type": "function", "function": {"name": "f", "arguments": "{}"}}])";
  using msg = wire::chat_message;
  std::vector<msg> msgs = {{"system", "Be brief.", "", ""}};
  for (int t = 0; t < 5; ++t) {
    const auto k = std::to_string(t);
    msgs.push_back({"user", "question " + k + " about the weather in a city far away from here", "", ""});
    if (t == 2) {  // a turn with a tool call and its result
      msgs.push_back({"assistant", "", "", calls});
      msgs.push_back({"tool", "sunny " + k, "", ""});
    }
    msgs.push_back({"assistant", "answer " + k + " which is rather long and detailed as answers go", "", ""});
  }
  msgs.push_back({"user", "the last question", "", ""});
  wire::generate_request r;
  r.id = "r";
  r.kind = wire::prompt_kind::messages;
  r.truncate_messages = true;
  auto prompt_of = [&](std::vector<msg> kept) { return tok.encode(m.chat(kept, "", {})); };
  // The conversations truncation may leave: the system message, then from a user message on.
  std::vector<std::vector<int32_t>> kept_prompts;
  for (size_t i = 2; i < msgs.size(); ++i)
    if (msgs[i].role == "user") {
      std::vector<msg> kept = {msgs[0]};
      kept.insert(kept.end(), msgs.begin() + static_cast<ptrdiff_t>(i), msgs.end());
      kept_prompts.push_back(prompt_of(kept));
    }
  BOOST_REQUIRE(kept_prompts.size() == 5u);
  const auto whole = prompt_of(msgs);
  r.messages = msgs;
  m.max_model_len = static_cast<int32_t>(whole.size()) + 1;  // fits as it is: nothing dropped
  auto b = build_generate(r, m);
  BOOST_REQUIRE_MESSAGE(b.req, b.error.message);
  BOOST_TEST(b.req->prompt == whole, boost::test_tools::per_element());
  for (size_t drop = 0; drop < kept_prompts.size(); ++drop) {
    // Room for exactly the conversation from the (drop + 1)-th cut on: dropping one turn less
    // does not fit.
    m.max_model_len = static_cast<int32_t>(kept_prompts[drop].size()) + 1;
    b = build_generate(r, m);
    BOOST_REQUIRE_MESSAGE(b.req, b.error.message);
    BOOST_TEST(b.req->prompt == kept_prompts[drop], boost::test_tools::per_element());
  }
  m.max_model_len = static_cast<int32_t>(kept_prompts.back().size());  // the last turn alone is too long
  b = build_generate(r, m);
  BOOST_REQUIRE(!b.req);
  BOOST_TEST(to_string(b.error.code) == "prompt_too_long");
  BOOST_TEST(b.error.message.find("the last turn alone does not fit") != std::string::npos, b.error.message);
  r.truncate_messages = false;  // the default: refused, nothing dropped
  m.max_model_len = static_cast<int32_t>(whole.size());
  b = build_generate(r, m);
  BOOST_TEST(to_string(b.error.code) == "prompt_too_long");
}

BOOST_AUTO_TEST_SUITE_END()
