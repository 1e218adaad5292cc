// End to end: speculative decoding by prompt lookup (`speculative.num_tokens`) changes no output.
// Every token is still the one plain decoding samples (greedy, seeded, with penalties, logprobs,
// a grammar, under preemption), while the metrics show drafts verified and accepted; random-weight
// models fall into loops, so the drafts are often right and sometimes wrong.
#include "tests/actors/e2e_fixture.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/model/safetensors.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

serve::server_config spec_config(int32_t k) {
  auto c = test_config();
  c.num_speculative_tokens = k;
  return c;
}

std::vector<wire::generate_request> mixed_requests(unsigned seed, int count, int32_t max_tokens) {
  std::mt19937 rng(seed);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < count; ++i) {
    auto r = ids_request("r" + std::to_string(i), random_prompt(rng, 40), max_tokens, i % 2 ? int64_t{i} : -1);
    if (i % 4 == 3) r.sampling.repetition_penalty = 1.3;  // penalties see every accepted draft
    if (i % 4 == 1) r.logprobs = 2;
    reqs.push_back(r);
  }
  return reqs;
}

std::vector<client::completion> serve_all(actors::server& srv, const std::vector<wire::generate_request>& reqs) {
  client::client cl("127.0.0.1", srv.port());
  std::vector<client::stream> streams;
  for (const auto& r : reqs) streams.push_back(cl.generate(r));
  std::vector<client::completion> out;
  for (auto& s : streams) {
    client::completion c;
    while (auto t = s.next()) {
      c.ids.insert(c.ids.end(), t->ids.begin(), t->ids.end());
      if (t->logprobs) c.logprobs.push_back(*t->logprobs);
    }
    c.done = s.done();
    out.push_back(std::move(c));
  }
  return out;
}

// Four requests of ~140 tokens in a pool for one 256-token sequence (they preempt each other),
// prompts in 32-token chunks: each still gets the reference's tokens, some from accepted drafts.
void check_under_preemption(serve::server_config cfg) {
  cfg.num_kv_blocks = 16;
  cfg.max_num_batched_tokens = 32;
  auto srv = start(cfg);
  std::mt19937 rng(8);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(ids_request("p" + std::to_string(i), random_prompt(rng, 40), 100, i % 2 ? i : -1));
  auto got = serve_all(*srv, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    BOOST_TEST(got[i].ids == reference(tiny_dense(), reqs[i]), boost::test_tools::per_element());
  BOOST_TEST(metric(*srv, "num_preemptions_total") > 0.0);
  BOOST_TEST(metric(*srv, "spec_decode_num_accepted_tokens_total") > 0.0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_speculative)

BOOST_AUTO_TEST_CASE(drafts_change_no_token_and_no_logprob) {
  auto reqs = mixed_requests(5, 12, 48);
  auto on = start(spec_config(4));
  auto off = start(spec_config(0));
  auto with = serve_all(*on, reqs);
  auto without = serve_all(*off, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST_CONTEXT("request " << i) {
      BOOST_TEST(with[i].ids == without[i].ids, boost::test_tools::per_element());
      BOOST_TEST(with[i].ids.size() == 48u);
      BOOST_TEST((with[i].logprobs == without[i].logprobs));
      if (!reqs[i].sampling.repetition_penalty)
        BOOST_TEST(with[i].ids == reference(tiny_dense(), reqs[i]), boost::test_tools::per_element());
    }
  }
  const double drafts = metric(*on, "spec_decode_num_draft_tokens_total");
  const double accepted = metric(*on, "spec_decode_num_accepted_tokens_total");
  BOOST_TEST(accepted > 0.0);
  BOOST_TEST(accepted < drafts);  // some were wrong: the rejection path ran too
  BOOST_TEST(metric(*off, "spec_decode_num_draft_tokens_total") == 0.0);
  BOOST_TEST(eventually([&] { return server_idle(*on); }));
}

BOOST_AUTO_TEST_CASE(drafts_under_preemption_and_chunked_prompts) { check_under_preemption(spec_config(6)); }

// A grammar advances token by token through accepted drafts: with the real tokenizer, structured
// and stop-string requests give the same text with and without drafts.
BOOST_AUTO_TEST_CASE(grammars_and_stop_strings_see_every_accepted_draft) {
  using kind = wire::structured_output::kind;
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 6; ++i) {
    wire::generate_request r;
    r.id = "s" + std::to_string(i);
    r.kind = wire::prompt_kind::text;
    r.prompt = "Say it again and again: abc abc abc abc";
    r.max_tokens = 60;
    r.sampling.temperature = i % 2 ? 0.7 : 0.0;
    r.sampling.seed = static_cast<uint64_t>(i);
    if (i < 2) r.structured = {kind::regex, "(abc ){1,12}[0-9]{1,4}", {}};
    if (i == 2 || i == 3) r.structured = {kind::json_object, "", {}};
    if (i >= 4) r.stop = {"abc abc"};
    reqs.push_back(r);
  }
  auto text_of = [&](int32_t k) {
    auto srv = start(spec_config(k), full_vocab_dir, tokenizer_dir);
    client::client cl("127.0.0.1", srv->port());
    std::vector<std::string> texts;
    for (const auto& r : reqs) texts.push_back(cl.complete(r).text);
    return std::make_pair(texts, metric(*srv, "spec_decode_num_draft_tokens_total"));
  };
  auto [with, drafts] = text_of(4);
  auto [without, none] = text_of(0);
  for (size_t i = 0; i < reqs.size(); ++i) BOOST_TEST(with[i] == without[i], "request " << i);
  BOOST_TEST(drafts > 0.0);
  BOOST_TEST(none == 0.0);
}

// A draft model (speculative.model): the target's own weights as the draft guess greedy tokens
// right, another model of the same vocabulary (tiny-moe) mostly wrong; the tokens and logprobs are
// the plain ones either way, also under preemption with chunked prompts and prefix caching.
BOOST_AUTO_TEST_CASE(a_draft_model_changes_no_token) {
  auto reqs = mixed_requests(9, 8, 40);
  auto off = start(spec_config(0));
  auto without = serve_all(*off, reqs);
  for (const std::string& draft : {tiny_dense_dir, std::string(TROUPE_TEST_DATA_DIR "/golden/tiny-moe")}) {
    BOOST_TEST_CONTEXT("draft " << draft) {
      auto cfg = spec_config(3);
      cfg.speculative_model = draft;
      cfg.adaptive_draft_length = false;  // a draft as large as the model never pays: guess anyway
      auto on = start(cfg);
      auto with = serve_all(*on, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) {
        BOOST_TEST(with[i].ids == without[i].ids, "request " << i);
        BOOST_TEST((with[i].logprobs == without[i].logprobs), "request " << i);
      }
      const double drafts = metric(*on, "spec_decode_num_draft_tokens_total");
      const double accepted = metric(*on, "spec_decode_num_accepted_tokens_total");
      BOOST_TEST_MESSAGE(accepted << " of " << drafts << " drafts accepted");
      BOOST_TEST(drafts > 0.0);
      if (draft == tiny_dense_dir) BOOST_TEST(accepted > drafts / 2);
      BOOST_TEST(eventually([&] { return server_idle(*on); }));
    }
  }
  auto cfg = spec_config(4);
  cfg.speculative_model = tiny_dense_dir;
  cfg.adaptive_draft_length = false;
  check_under_preemption(cfg);
}

// A draft model that cannot serve stops the start with the key and the reason.
BOOST_AUTO_TEST_CASE(an_unusable_draft_model_stops_the_start) {
  auto expect_error = [](serve::server_config c, const std::string& needle) {
    try {
      start(std::move(c));
      BOOST_FAIL("the server started; expected an error containing '" << needle << "'");
    } catch (const troupe::error& e) {
      BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "'" << e.what() << "' lacks '" << needle << "'");
    }
  };
  auto c = spec_config(3);
  c.speculative_model = full_vocab_dir;  // 151936 ids against tiny-dense's 4096
  expect_error(c, "a draft model must share the model's tokenizer");
  c.speculative_model = TROUPE_TEST_DATA_DIR "/golden/no-such-model";
  expect_error(c, "speculative.model (--speculative-model)");
  c = spec_config(0);
  c.speculative_model = tiny_dense_dir;
  expect_error(c, "needs speculative.num_tokens");

  // tiny-dense's weights under a config that reaches 128 positions (max_model_len is 256), and
  // as a bare Qwen3Model export without lm_head (an embedding model).
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("troupe-drafts-" + std::to_string(::getpid()));
  const auto short_dir = dir / "short", headless_dir = dir / "headless";
  fs::create_directories(short_dir);
  fs::create_directories(headless_dir);
  auto config = nlohmann::json::parse(std::ifstream(tiny_dense_dir + "/config.json"));
  auto short_config = config;
  short_config["max_position_embeddings"] = 128;
  std::ofstream(short_dir / "config.json") << short_config.dump();
  fs::copy_file(tiny_dense_dir + "/model.safetensors", short_dir / "model.safetensors");
  config["tie_word_embeddings"] = false;
  std::ofstream(headless_dir / "config.json") << config.dump();
  {
    safetensors_file in(tiny_dense_dir + "/model.safetensors");
    std::vector<tensor_to_write> ts;
    for (const auto& t : in.tensors())
      ts.push_back({t.name.rfind("model.", 0) == 0 ? t.name.substr(6) : t.name, t.type, t.shape, t.data, {}});
    write_safetensors((headless_dir / "model.safetensors").string(), ts);
  }
  c = spec_config(3);
  c.speculative_model = short_dir.string();
  expect_error(c, "its context length (128) is below max_model_len (256)");
  c.speculative_model = headless_dir.string();
  expect_error(c, "has no lm_head (an embedding model) and cannot guess tokens");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
