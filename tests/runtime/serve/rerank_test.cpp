// Reranking's prompts and scores (runtime/serve/rerank.hpp, build_rerank): each document's prompt is
// the ids Hugging Face `tokenizers` gives Qwen3-Reranker's model-card prompt
// (tests/data/tokenizer/rerank_prompt_cases.json, tools/reference/rerank_prompt_cases.py), "yes"
// and "no" are its ids, the score is the two-way softmax, and each refusal names why.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/serve/request_builder.hpp"
#include "runtime/serve/rerank.hpp"
#include "tests/runtime/model/seq_cls_checkpoint.hpp"

using namespace troupe;
using namespace troupe::serve;

namespace {

const tokenizer& qwen3() {
  static const tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  return tok;
}

model_facts facts() {
  model_facts m;
  m.name = "reranker";
  m.vocab_size = 151936;
  m.max_model_len = 200;
  m.tok = &qwen3();
  return m;
}

wire::generate_request rerank_request(std::string query, std::vector<std::string> docs,
                                      std::optional<std::string> instruction = std::nullopt) {
  wire::generate_request r;
  r.id = "k";
  r.rerank = wire::rerank_fields{{std::move(query)}, std::move(docs), std::move(instruction)};
  r.n = static_cast<int32_t>(r.rerank->documents.size());
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rerank_suite)

// A seq-cls conversion of a reranker scores every document as the reranker does (sigmoid of its one
// logit against the softmax of yes over no: the same number, up to float32 rounding of the dot
// products), its config names the class and labels, and it refuses to generate.
BOOST_AUTO_TEST_CASE(a_sequence_classifier_of_one_label_scores_as_the_reranker_it_was_made_from) {
  const std::string src = TROUPE_TEST_DATA_DIR "/golden/e2e-full-vocab";
  const auto yes_no = rerank_tokens_of(qwen3(), 151936, "reranker");
  const std::string dir =
      test::write_seq_cls(src, (std::filesystem::temp_directory_path() / "troupe-rerank-seq-cls").string(), yes_no);
  auto causal = load_checkpoint(src);
  auto classifier = load_checkpoint(dir);
  BOOST_TEST(classifier->config.num_labels == 1);
  BOOST_TEST(classifier->config.labels == std::vector<std::string>{"LABEL_0"}, boost::test_tools::per_element());
  BOOST_TEST(model_class_name(classifier->config) == "Qwen3ForSequenceClassification");
  BOOST_TEST(classifier->weights.lm_head.rows == 1);
  generator a(*causal), b(*classifier);
  // Over tensor-parallel groups wider than its one label: the ranks without a score row compute
  // none, and the row is the same up to the group's float32 summation order.
  generator b2(*classifier, parallel_config{2, false, 0}), b4(*classifier, parallel_config{4, false, 0});
  const std::pair<const char*, const char*> pairs[] = {
      {"What is the capital of China?", "The capital of China is Beijing."},
      {"What is the capital of China?", "Gravity is a force that attracts two bodies towards each other."},
      {"how to bake bread", "Mix flour, water, salt and yeast; knead; let it rise; bake at 230 C."}};
  for (const auto& [q, d] : pairs) {
    const auto prompt = rerank_prompt(qwen3(), kDefaultRerankInstruction, q, d);
    const auto row = b.last_logits(prompt);
    BOOST_TEST_REQUIRE(row.size() == 1u);
    const double want = rerank_score(a.last_logits(prompt), yes_no);
    const double got = rerank_score(row, rerank_tokens::single_logit());
    BOOST_TEST(got == want, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(got == 1.0 / (1.0 + std::exp(-static_cast<double>(row[0]))), boost::test_tools::tolerance(1e-15));
    for (auto* g : {&b2, &b4}) {
      const auto split = g->last_logits(prompt);
      BOOST_TEST_REQUIRE(split.size() == 1u);
      BOOST_TEST(split[0] == row[0], boost::test_tools::tolerance(1e-4f));
    }
  }
  try {
    b.generate({1, 2, 3}, generate_options{});
    BOOST_ERROR("a classifier generated");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == errc::unsupported));
    BOOST_TEST(std::string(e.what()).find("is a Qwen3ForSequenceClassification (a score head of 1 labels, no lm_head)") !=
                   std::string::npos,
               e.what());
  }
  std::filesystem::remove_all(dir);
}

// Served, a classifier of one label reranks by its logit; of more labels it does not; neither
// generates.
BOOST_AUTO_TEST_CASE(a_served_classifier_reranks_with_one_label_and_never_generates) {
  auto m = facts();
  m.labels = {"LABEL_0"};
  auto b = build_rerank(rerank_request("q", {"d1", "d2"}), m);
  BOOST_REQUIRE_MESSAGE(b.req.has_value(), b.error.message);
  BOOST_TEST(b.req->tokens.yes == 0);
  BOOST_TEST(b.req->tokens.no == -1);
  BOOST_TEST(b.req->prompts.size() == 2u);
  m.labels = {"a", "b", "c"};
  b = build_rerank(rerank_request("q", {"d"}), m);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'reranker' is a sequence classifier of 3 labels: reranking reads one score, "
                                "which a classifier of one label gives");
  wire::generate_request g;
  g.id = "g";
  g.kind = wire::prompt_kind::ids;
  g.prompt_ids = {1, 2, 3};
  m.labels = {"LABEL_0"};
  const auto r = build_generate(g, m);
  BOOST_TEST(!r.req.has_value());
  BOOST_TEST(to_string(r.error.code) == "unsupported");
  BOOST_TEST(r.error.message.find("model 'reranker' is a sequence classifier (1 labels, no lm_head)") == 0u,
             r.error.message);
}

// A classifier's logits row: softmax over its labels (sigmoid for one), in double; NaN refused.
BOOST_AUTO_TEST_CASE(label_probabilities_are_the_softmax_of_the_row) {
  const std::vector<float> row = {1.f, 3.f, -2.f};
  const auto p = label_probs(row);
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(-2.0);
  BOOST_TEST_REQUIRE(p.size() == 3u);
  for (size_t i = 0; i < 3; ++i)
    BOOST_TEST(p[i] == static_cast<float>(std::exp(static_cast<double>(row[i])) / z), "label " << i);
  BOOST_TEST(likeliest_label(p) == 1u);
  BOOST_TEST(label_probs(std::vector<float>{1000.f, -1000.f})[1] == 0.f);  // never NaN
  BOOST_TEST(label_probs(std::vector<float>{0.f})[0] == 0.5f);
  BOOST_CHECK_THROW(label_probs(std::vector<float>{0.f, std::nanf("")}), troupe::error);
  BOOST_CHECK_THROW(label_probs(std::vector<float>{}), troupe::error);
  auto m = facts();
  wire::generate_request r;
  r.id = "c";
  r.embed = wire::embed_fields{{"text"}, {}, std::nullopt, true, true};
  r.n = 1;
  const auto b = build_embed(r, m);
  BOOST_TEST(!b.req.has_value());
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'reranker' is not a sequence classifier: classify needs a "
                                "Qwen3ForSequenceClassification checkpoint (a score head of label logits)");
  m.labels = {"neg", "pos"};
  BOOST_TEST(build_embed(r, m).req.has_value());
}

BOOST_AUTO_TEST_CASE(a_single_logit_scores_by_its_sigmoid) {
  const auto t = rerank_tokens::single_logit();
  std::vector<float> row = {0.f};
  BOOST_TEST(rerank_score(row, t) == 0.5);
  row[0] = 2.f;
  BOOST_TEST(rerank_score(row, t) == 1.0 / (1.0 + std::exp(-2.0)), boost::test_tools::tolerance(1e-15));
  row[0] = -1000.f;  // never NaN
  BOOST_TEST(rerank_score(row, t) == 0.0);
  row[0] = 1000.f;
  BOOST_TEST(rerank_score(row, t) == 1.0);
}

BOOST_AUTO_TEST_CASE(prompts_are_the_model_cards_as_hugging_face_encodes_them) {
  const auto ref = nlohmann::json::parse(std::ifstream(TROUPE_TEST_DATA_DIR "/tokenizer/rerank_prompt_cases.json"));
  const auto t = rerank_tokens_of(qwen3(), 151936, "reranker");
  BOOST_TEST(t.yes == ref["yes"].get<int32_t>());
  BOOST_TEST(t.no == ref["no"].get<int32_t>());
  for (const auto& c : ref["cases"]) {
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const std::string instruction =
        c["instruction"].is_null() ? std::string(kDefaultRerankInstruction) : c["instruction"].get<std::string>();
    const auto got = rerank_prompt(qwen3(), instruction, c["query"].get<std::string>(), c["document"].get<std::string>());
    BOOST_TEST(got == want, boost::test_tools::per_element());
    // Through the request: its instruction, or the default when it gives none.
    auto r = rerank_request(c["query"], {c["document"].get<std::string>(), "x"},
                            c["instruction"].is_null() ? std::nullopt : std::optional<std::string>(instruction));
    auto b = build_rerank(r, facts());
    BOOST_REQUIRE(b.req.has_value());
    BOOST_TEST(b.req->prompts.size() == 2u);
    BOOST_TEST(b.req->prompts[0] == want, boost::test_tools::per_element());
    BOOST_TEST(b.req->tokens.yes == t.yes);
  }
}

// One query per document (vLLM's pairwise /v1/score): document i's prompt is the card's prompt of
// its own query; a count of queries that is neither one nor the documents' is refused.
BOOST_AUTO_TEST_CASE(each_document_may_have_its_own_query) {
  const auto ref = nlohmann::json::parse(std::ifstream(TROUPE_TEST_DATA_DIR "/tokenizer/rerank_prompt_cases.json"));
  wire::generate_request r = rerank_request("unused", {});
  for (const auto& c : ref["cases"]) {
    if (!c["instruction"].is_null()) continue;
    r.rerank->queries.push_back(c["query"].get<std::string>());
    r.rerank->documents.push_back(c["document"].get<std::string>());
  }
  r.rerank->queries.erase(r.rerank->queries.begin());
  BOOST_REQUIRE_GE(r.rerank->documents.size(), 2u);
  BOOST_REQUIRE(r.rerank->queries[0] != r.rerank->queries[1]);
  auto b = build_rerank(r, facts());
  BOOST_REQUIRE_MESSAGE(b.req.has_value(), b.error.message);
  size_t i = 0;
  for (const auto& c : ref["cases"]) {
    if (!c["instruction"].is_null()) continue;
    BOOST_TEST(b.req->prompts.at(i) == c["ids"].get<std::vector<int32_t>>(), boost::test_tools::per_element());
    ++i;
  }
  BOOST_TEST(i == b.req->prompts.size());
  r.rerank->queries.push_back("one too many");
  b = build_rerank(r, facts());
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message.find("needs one query, or one per document") != std::string::npos, b.error.message);
}

BOOST_AUTO_TEST_CASE(the_score_is_the_softmax_of_yes_over_no) {
  const rerank_tokens t{3, 1};
  std::vector<float> row = {0.f, 2.f, -1.f, 2.f, 7.f};  // yes == no: one half
  BOOST_TEST(rerank_score(row, t) == 0.5);
  row[3] = 4.f;  // yes two nats above no
  BOOST_TEST(rerank_score(row, t) == std::exp(4.0) / (std::exp(4.0) + std::exp(2.0)), boost::test_tools::tolerance(1e-15));
  row[3] = -1000.f;  // far apart: 0 or 1, never NaN
  BOOST_TEST(rerank_score(row, t) == 0.0);
  row[1] = -2000.f;
  BOOST_TEST(rerank_score(row, t) == 1.0);
}

BOOST_AUTO_TEST_CASE(refusals_name_why) {
  auto m = facts();
  m.tok = nullptr;
  auto b = build_rerank(rerank_request("q", {"d"}), m);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'reranker' is served without a tokenizer: reranking needs one (its prompt is text)");
  m = facts();
  m.embedding_only = true;
  b = build_rerank(rerank_request("q", {"d"}), m);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message.find("has no lm_head.weight: it cannot rerank") != std::string::npos, b.error.message);
  m = facts();
  m.vocab_size = 4096;  // a tokenizer larger than the model's vocabulary
  b = build_rerank(rerank_request("q", {"d"}), m);
  BOOST_TEST(to_string(b.error.code) == "unsupported");
  BOOST_TEST(b.error.message == "model 'reranker' has a vocabulary of 4096 rows, without the ids of \"yes\" (9693) and "
                                "\"no\" (2152): it cannot rerank");
  m = facts();
  m.vocab_size = 32768;  // holds "yes" and "no", not the prompt's <|im_start|> (151644)
  b = build_rerank(rerank_request("q", {"d"}), m);
  BOOST_TEST(to_string(b.error.code) == "invalid_value");
  BOOST_TEST(b.error.message == "field 'documents[0]' encodes to token id 151644 (token 0), outside model 'reranker''s "
                                "vocabulary (size 32768): the tokenizer is larger than the model");
  m = facts();
  b = build_rerank(rerank_request("q", {"short", std::string(600, 'z'), "short"}), m);
  BOOST_TEST(to_string(b.error.code) == "prompt_too_long");
  BOOST_TEST(b.error.message.find("field 'documents[1]' makes a prompt of ") == 0u, b.error.message);
  BOOST_TEST(b.error.message.find("; max_model_len is 200") != std::string::npos, b.error.message);
}

BOOST_AUTO_TEST_SUITE_END()
