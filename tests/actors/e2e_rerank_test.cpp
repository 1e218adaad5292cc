// End to end: reranking over msgpack (`rerank`) and HTTP (`/v1/rerank`, `/rerank`) on the
// full-vocabulary golden model with the real tokenizer: each document's score is exactly P(yes) of
// the reranker prompt's last logits row as `troupe logits` computes it alone (the generator), the
// HTTP results best first with their documents, top_n the best; refusals name what is wrong.
// The model's final norm is scaled by 1/64 (exactly, in BF16) so that its random logits are small
// and the scores spread over (0, 1) instead of saturating at 0 or 1.
#include "tests/actors/e2e_fixture.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/model/safetensors.hpp"

#include "runtime/serve/rerank.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tests/actors/http_client.hpp"
#include "tests/runtime/model/seq_cls_checkpoint.hpp"

using namespace troupe;
using namespace troupe::e2e;
using json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

// e2e-full-vocab with model.norm.weight divided by 64, written once into a temporary directory
// (removed when the process ends).
struct scaled_model {
  fs::path dir = fs::temp_directory_path() / ("troupe-rerank-" + std::to_string(::getpid()));
  scaled_model() {
    const std::string& src = full_vocab_dir;
    fs::create_directories(dir);
    fs::copy_file(src + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
    safetensors_file in(src + "/model.safetensors");
    std::vector<tensor_to_write> ts;
    std::vector<uint16_t> norm;
    for (const auto& t : in.tensors()) {
      ts.push_back({t.name, t.type, t.shape, t.data, {}});
      if (t.name != "model.norm.weight") continue;
      BOOST_REQUIRE(t.type == dtype::bf16);
      norm.resize(static_cast<size_t>(t.shape[0]));
      std::memcpy(norm.data(), t.data, norm.size() * sizeof(uint16_t));
      for (auto& w : norm) {  // BF16 is float32's top half: scale as float32, exactly
        uint32_t bits = uint32_t{w} << 16;
        float f;
        std::memcpy(&f, &bits, sizeof f);
        f /= 64.0f;
        std::memcpy(&bits, &f, sizeof f);
        w = static_cast<uint16_t>(bits >> 16);
      }
      ts.back().data = norm.data();
    }
    BOOST_REQUIRE(!norm.empty());
    write_safetensors((dir / "model.safetensors").string(), ts);
  }
  ~scaled_model() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

const std::string& scaled_full_vocab_dir() {
  static const scaled_model m;
  static const std::string d = m.dir.string();
  return d;
}

const tokenizer& qwen3() {
  static const tokenizer t(tokenizer_dir);
  return t;
}

// The score of `document` computed alone: the prompt's logits through the generator, as the
// executor reads them (float32 on the wire's way, as the executor hands it on).
double reference_score(const std::string& instruction, const std::string& query, const std::string& document) {
  static auto ck = load_checkpoint(scaled_full_vocab_dir());
  const auto prompt = serve::rerank_prompt(qwen3(), instruction, query, document);
  const auto logits = generator(*ck).prompt_logits(prompt);
  const auto vocab = static_cast<size_t>(ck->config.vocab_size);
  const std::span<const float> last(logits.data() + logits.size() - vocab, vocab);
  return static_cast<float>(serve::rerank_score(last, serve::rerank_tokens_of(qwen3(), ck->config.vocab_size, "e2e-full-vocab")));
}

const std::string kQuery = "Which planet is known as the red planet?";
const std::vector<std::string> kDocs = {"Mars is called the red planet because of iron oxide on its surface.",
                                        "Bananas are rich in potassium.",
                                        "Jupiter is the largest planet in the solar system.",
                                        "The red planet, Mars, has two small moons."};

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_rerank)

BOOST_AUTO_TEST_CASE(msgpack_rerank_scores_each_document_as_alone) {
  auto srv = start(test_config(), scaled_full_vocab_dir(), tokenizer_dir);
  client::client cl("127.0.0.1", srv->port());
  wire::generate_request r;
  r.id = "k";
  r.rerank = wire::rerank_fields{{kQuery}, kDocs, std::nullopt};
  const auto got = cl.rerank(r);
  BOOST_REQUIRE_EQUAL(got.size(), kDocs.size());
  for (size_t i = 0; i < kDocs.size(); ++i) {
    BOOST_TEST(got[i] == reference_score(std::string(serve::kDefaultRerankInstruction), kQuery, kDocs[i]), "document " << i);
    BOOST_TEST((got[i] > 0.01 && got[i] < 0.99), "document " << i << ": " << got[i]);  // not saturated
  }
  // Another instruction makes another prompt, and another score.
  auto custom = r;
  custom.id = "k2";
  custom.rerank->instruction = "Judge astronomy facts";
  custom.rerank->documents = {kDocs[0]};
  const auto one = cl.rerank(custom);
  BOOST_REQUIRE_EQUAL(one.size(), 1u);
  BOOST_TEST(one[0] == reference_score("Judge astronomy facts", kQuery, kDocs[0]));
  BOOST_TEST(one[0] != got[0]);
  // A document too long for max_model_len (256) is refused naming it.
  auto too_long = r;
  too_long.id = "k3";
  too_long.rerank->documents = {"fine", std::string(2000, 'x')};
  try {
    cl.rerank(too_long);
    BOOST_ERROR("a prompt over max_model_len was accepted");
  } catch (const client::request_error& e) {
    BOOST_TEST((e.error().code == wire::error_code::prompt_too_long));
    BOOST_TEST(e.error().message.find("'documents[1]'") != std::string::npos, e.error().message);
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(http_rerank_lists_the_best_first) {
  auto srv = start(test_config(), scaled_full_vocab_dir(), tokenizer_dir);
  std::vector<double> want;
  for (const auto& d : kDocs) want.push_back(reference_score(std::string(serve::kDefaultRerankInstruction), kQuery, d));
  std::vector<size_t> order(kDocs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return want[a] > want[b]; });
  http_client c(srv->http_port());
  for (const char* path : {"/v1/rerank", "/rerank"}) {
    BOOST_TEST_CONTEXT(path) {
      c.post(path, json{{"query", kQuery}, {"documents", kDocs}, {"top_n", 3}}.dump());
      auto r = c.read();
      BOOST_TEST_REQUIRE(r.status == 200, r.body);
      auto j = json::parse(r.body);
      BOOST_TEST(j["id"].get<std::string>().rfind("rerank-", 0) == 0u);
      BOOST_TEST(j["model"] == fs::path(scaled_full_vocab_dir()).filename().string());  // the served name
      BOOST_REQUIRE_EQUAL(j["results"].size(), 3u);
      for (size_t k = 0; k < 3; ++k) {
        BOOST_TEST(j["results"][k]["index"] == order[k]);
        BOOST_TEST(j["results"][k]["document"]["text"] == kDocs[order[k]]);
        BOOST_TEST(j["results"][k]["relevance_score"].get<double>() == want[order[k]]);
      }
      int64_t tokens = 0;
      for (const auto& d : kDocs)
        tokens += static_cast<int64_t>(serve::rerank_prompt(qwen3(), serve::kDefaultRerankInstruction, kQuery, d).size());
      BOOST_TEST(j["usage"]["total_tokens"] == tokens);
    }
  }
  // vLLM's /v1/score: the same scores, in the documents' order.
  c.post("/v1/score", json{{"text_1", kQuery}, {"text_2", kDocs}}.dump());
  auto sc = c.read();
  BOOST_TEST_REQUIRE(sc.status == 200, sc.body);
  auto sj = json::parse(sc.body);
  BOOST_REQUIRE_EQUAL(sj["data"].size(), kDocs.size());
  for (size_t i = 0; i < kDocs.size(); ++i) BOOST_TEST(sj["data"][i]["score"].get<double>() == want[i]);
  // Its pairwise form: text_1[i] against text_2[i], each pair as if alone.
  const std::vector<std::string> queries = {kQuery, "What is rich in potassium?", kQuery, "How many moons has Mars?"};
  c.post("/v1/score", json{{"text_1", queries}, {"text_2", kDocs}}.dump());
  auto pw = c.read();
  BOOST_TEST_REQUIRE(pw.status == 200, pw.body);
  auto pj = json::parse(pw.body);
  BOOST_REQUIRE_EQUAL(pj["data"].size(), kDocs.size());
  int64_t pair_tokens = 0;
  for (size_t i = 0; i < kDocs.size(); ++i) {
    BOOST_TEST(pj["data"][i]["index"] == i);
    BOOST_TEST(pj["data"][i]["score"].get<double>() ==
                   reference_score(std::string(serve::kDefaultRerankInstruction), queries[i], kDocs[i]),
               "pair " << i);
    pair_tokens += static_cast<int64_t>(
        serve::rerank_prompt(qwen3(), serve::kDefaultRerankInstruction, queries[i], kDocs[i]).size());
  }
  BOOST_TEST(pj["data"][1]["score"].get<double>() != want[1]);  // its own query, not text_1[0]
  BOOST_TEST(pj["usage"]["total_tokens"] == pair_tokens);
  c.post("/v1/score", json{{"text_1", {kQuery, kQuery}}, {"text_2", kDocs}}.dump());
  auto mismatch = c.read();
  BOOST_TEST(mismatch.status == 400);
  BOOST_TEST(json::parse(mismatch.body)["error"]["message"].get<std::string>().find("text_1 has 2 texts and text_2 4") !=
             std::string::npos);
  c.post("/v1/rerank", json{{"query", kQuery}}.dump());
  auto bad = c.read();
  BOOST_TEST(bad.status == 400);
  BOOST_TEST(json::parse(bad.body)["error"]["code"] == "missing_field");
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

// A Qwen3ForSequenceClassification made from the same model (its score row lm_head[yes] -
// lm_head[no]) is served as a reranker: the same scores up to float32 rounding of the dot
// products; generation is refused naming why.
BOOST_AUTO_TEST_CASE(a_sequence_classifier_reranks_and_refuses_to_generate) {
  const fs::path dir = fs::temp_directory_path() / ("troupe-rerank-seq-cls-" + std::to_string(::getpid()));
  test::write_seq_cls(scaled_full_vocab_dir(), dir.string(),
                      serve::rerank_tokens_of(qwen3(), 151936, "e2e-full-vocab"));
  {
    auto srv = start(test_config(), dir.string(), tokenizer_dir);
    http_client c(srv->http_port());
    c.post("/v1/score", json{{"text_1", kQuery}, {"text_2", kDocs}}.dump());
    auto sc = c.read();
    BOOST_TEST_REQUIRE(sc.status == 200, sc.body);
    auto sj = json::parse(sc.body);
    BOOST_REQUIRE_EQUAL(sj["data"].size(), kDocs.size());
    for (size_t i = 0; i < kDocs.size(); ++i)
      BOOST_TEST(sj["data"][i]["score"].get<double>() ==
                     reference_score(std::string(serve::kDefaultRerankInstruction), kQuery, kDocs[i]),
                 boost::test_tools::tolerance(1e-5));
    c.post("/v1/completions", json{{"prompt", "Hello"}, {"max_tokens", 4}}.dump());
    auto gen = c.read();
    BOOST_TEST(gen.status == 400);
    BOOST_TEST(json::parse(gen.body)["error"]["message"].get<std::string>().find("is a sequence classifier (1 labels") !=
                   std::string::npos,
               gen.body);
    BOOST_TEST(eventually([&] { return server_idle(*srv); }));
  }
  fs::remove_all(dir);
}

// /classify (vLLM's) on a classifier of three labels whose score rows are lm_head rows of three
// tokens: each input's probabilities are the softmax of the causal model's logits at those tokens
// (the generator's, alone), its label the likeliest; a causal model refuses the request.
BOOST_AUTO_TEST_CASE(classify_gives_each_input_its_label_probabilities) {
  const fs::path dir = fs::temp_directory_path() / ("troupe-classify-" + std::to_string(::getpid()));
  const auto yes_no = serve::rerank_tokens_of(qwen3(), 151936, "e2e-full-vocab");
  const std::vector<test::label_row> labels = {{"yes", yes_no.yes}, {"no", yes_no.no}, {"maybe", 1000}};
  test::write_seq_cls(scaled_full_vocab_dir(), dir.string(), labels);
  const std::vector<std::string> inputs = {"The movie was wonderful.", "Terrible service, never again.", "It rained."};
  // Each input's expected probabilities, from the causal model alone, and the prompts' tokens.
  std::vector<std::vector<float>> want;
  int64_t tokens = 0;
  {
    auto causal = load_checkpoint(scaled_full_vocab_dir());
    for (const auto& in : inputs) {
      const auto prompt = qwen3().encode_with_special_tokens(in);
      tokens += static_cast<int64_t>(prompt.size());
      const auto logits = generator(*causal).last_logits(prompt);
      std::vector<float> row;
      for (const auto& l : labels) row.push_back(logits[static_cast<size_t>(l.plus)]);
      want.push_back(serve::label_probs(row));
    }
  }
  {
    auto srv = start(test_config(), dir.string(), tokenizer_dir);
    http_client c(srv->http_port());
    for (const char* path : {"/classify", "/v1/classify"}) {
      BOOST_TEST_CONTEXT(path) {
        c.post(path, json{{"input", inputs}, {"user", "t"}}.dump());
        auto r = c.read();
        BOOST_TEST_REQUIRE(r.status == 200, r.body);
        auto j = json::parse(r.body);
        BOOST_TEST(j["id"].get<std::string>().rfind("classify-", 0) == 0u);
        BOOST_TEST(j["object"] == "list");
        BOOST_REQUIRE_EQUAL(j["data"].size(), inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i) {
          const auto& d = j["data"][i];
          BOOST_TEST(d["index"] == i);
          BOOST_TEST(d["num_classes"] == 3);
          BOOST_REQUIRE_EQUAL(d["probs"].size(), 3u);
          for (size_t k = 0; k < 3; ++k)
            BOOST_TEST(d["probs"][k].get<double>() == want[i][k], boost::test_tools::tolerance(1e-5));
          BOOST_TEST(d["label"] == labels[serve::likeliest_label(want[i])].name, "input " << i);
        }
        BOOST_TEST(j["usage"]["prompt_tokens"] == tokens);
        BOOST_TEST(j["usage"]["completion_tokens"] == 0);
      }
    }
    // The msgpack protocol's embed with task classify (the C++ client's classify()): the same numbers.
    client::client cl("127.0.0.1", srv->port());
    wire::generate_request mr;
    mr.embed = wire::embed_fields{inputs, {}, std::nullopt, true, false};
    const auto got = cl.classify(mr);
    BOOST_REQUIRE_EQUAL(got.size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      BOOST_REQUIRE_EQUAL(got[i].probs.size(), 3u);
      for (size_t k = 0; k < 3; ++k) BOOST_TEST(got[i].probs[k] == want[i][k], boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(got[i].label == labels[serve::likeliest_label(want[i])].name);
    }
    c.post("/classify", json{{"input", "x"}, {"dimensions", 4}}.dump());
    auto bad = c.read();
    BOOST_TEST(bad.status == 400);
    BOOST_TEST(json::parse(bad.body)["error"]["message"].get<std::string>().find("unknown field 'dimensions' for /classify") !=
               std::string::npos);
    BOOST_TEST(eventually([&] { return server_idle(*srv); }));
  }
  fs::remove_all(dir);
  auto srv = start(test_config(), scaled_full_vocab_dir(), tokenizer_dir);
  http_client c(srv->http_port());
  c.post("/classify", json{{"input", "x"}}.dump());
  auto refused = c.read();
  BOOST_TEST(refused.status != 200);
  BOOST_TEST(json::parse(refused.body)["error"]["message"].get<std::string>().find("is not a sequence classifier") !=
                 std::string::npos,
             refused.body);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_SUITE_END()
