// A sequence classifier made from a causal LM, as the Qwen3-Reranker "seq-cls" conversions ship a
// reranker (tests of runtime/serve and the e2e rerank suite share it).
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/core/dtype.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/tensor_layout.hpp"
#include "runtime/serve/rerank.hpp"

namespace troupe::test {

// One label's score row: lm_head[plus] - lm_head[minus] (minus < 0: lm_head[plus] alone).
struct label_row {
  std::string name;
  int32_t plus = 0, minus = -1;
};

// `src` (a causal LM with tied embeddings) as a Qwen3ForSequenceClassification whose score rows
// are `labels` (in float32, so each difference of bf16 rows is exact), the other tensors as they
// are: with {yes, no} the way the Qwen3-Reranker "seq-cls" conversions ship a reranker. Returns
// the new directory.
inline std::string write_seq_cls(const std::string& src, const std::string& out, const std::vector<label_row>& labels) {
  namespace fs = std::filesystem;
  fs::remove_all(out);
  fs::create_directories(out);
  auto ck = load_checkpoint(src);
  BOOST_REQUIRE(ck->config.tie_word_embeddings);
  std::vector<tensor_to_write> tensors;
  for (const auto& e : expected_tensors(ck->config)) {
    tensor_to_write w{e.name, dtype::f32, e.shape, nullptr, {}};
    if (const auto* norm = norm_slot(ck->weights, e)) {
      w.data = norm->data();
    } else {
      const auto* r = weight_slot(ck->weights, e);
      w.type = r->type;
      w.data = r->data;
    }
    tensors.push_back(std::move(w));
  }
  const auto& emb = ck->weights.embed_tokens;
  BOOST_REQUIRE(emb.type == dtype::bf16);
  const int64_t h = emb.cols, n = static_cast<int64_t>(labels.size());
  std::vector<float> score(static_cast<size_t>(n * h));
  const auto* rows = static_cast<const uint16_t*>(emb.data);
  nlohmann::json names = nlohmann::json::object();
  for (int64_t l = 0; l < n; ++l) {
    const auto& lr = labels[static_cast<size_t>(l)];
    for (int64_t c = 0; c < h; ++c)
      score[static_cast<size_t>(l * h + c)] =
          bf16_to_f32(rows[lr.plus * h + c]) - (lr.minus >= 0 ? bf16_to_f32(rows[lr.minus * h + c]) : 0.0f);
    names[std::to_string(l)] = lr.name;
  }
  tensors.push_back({"score.weight", dtype::f32, {n, h}, score.data(), {}});
  write_safetensors(out + "/model.safetensors", tensors);
  auto config = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  config["architectures"] = {"Qwen3ForSequenceClassification"};
  config["id2label"] = names;
  std::ofstream(out + "/config.json") << config.dump(2);
  return out;
}

// A reranker's conversion: one label, lm_head[yes] - lm_head[no].
inline std::string write_seq_cls(const std::string& src, const std::string& out, serve::rerank_tokens t) {
  return write_seq_cls(src, out, {label_row{"LABEL_0", t.yes, t.no}});
}

}  // namespace troupe::test
