#include "runtime/serve/rerank.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/core/error.hpp"

namespace troupe::serve {

namespace {
// Qwen3-Reranker's model card, verbatim.
constexpr std::string_view kPrefix =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
constexpr std::string_view kSuffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
}  // namespace

std::vector<int32_t> rerank_prompt(const tokenizer& tok, std::string_view instruction, std::string_view query,
                                   std::string_view document) {
  std::vector<int32_t> ids;
  tok.encode(kPrefix, ids);
  std::string body = "<Instruct>: ";
  body.append(instruction).append("\n<Query>: ").append(query).append("\n<Document>: ").append(document);
  tok.encode(body, ids);
  tok.encode(kSuffix, ids);
  return ids;
}

rerank_tokens rerank_tokens_of(const tokenizer& tok, int64_t vocab_size, std::string_view model) {
  rerank_tokens t;
  const auto yes = tok.token_to_id("yes"), no = tok.token_to_id("no");
  if (!yes || !no)
    throw_error(errc::unsupported, std::string("reranking needs the single tokens \"yes\" and \"no\"; this vocabulary has no \"") +
                                       (yes ? "no" : "yes") + "\"");
  t.yes = *yes;
  t.no = *no;
  if (std::max(t.yes, t.no) >= vocab_size)
    throw_error(errc::unsupported, "model '" + std::string(model) + "' has a vocabulary of " + std::to_string(vocab_size) +
                                       " rows, without the ids of \"yes\" (" + std::to_string(t.yes) + ") and \"no\" (" +
                                       std::to_string(t.no) + "): it cannot rerank");
  return t;
}

rerank_tokens rerank_tokens_for(const tokenizer& tok, int64_t vocab_size, int64_t num_labels, std::string_view model) {
  if (num_labels > 1)
    throw_error(errc::unsupported, "model '" + std::string(model) + "' is a sequence classifier of " +
                                       std::to_string(num_labels) +
                                       " labels: reranking reads one score, which a classifier of one label gives");
  return num_labels == 1 ? rerank_tokens::single_logit() : rerank_tokens_of(tok, vocab_size, model);
}

namespace {
double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }  // never 0/0: 0 or 1 far out
}  // namespace

double rerank_score(std::span<const float> logits, rerank_tokens t) {
  if (t.no < 0) {
    TROUPE_ASSERT(t.yes == 0 && !logits.empty());
    return logistic(logits[0]);
  }
  TROUPE_ASSERT(t.yes >= 0 && t.no >= 0 && static_cast<size_t>(std::max(t.yes, t.no)) < logits.size());
  return logistic(static_cast<double>(logits[static_cast<size_t>(t.yes)]) - logits[static_cast<size_t>(t.no)]);
}

std::vector<float> label_probs(std::span<const float> logits) {
  if (logits.empty()) throw_error(errc::internal, "label_probs: an empty logits row");
  for (float v : logits)
    if (std::isnan(v)) throw_error(errc::internal, "label_probs: the classifier's logits row holds a NaN");
  if (logits.size() == 1) return {static_cast<float>(logistic(logits[0]))};
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> e(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += e[i] = std::exp(static_cast<double>(logits[i]) - top);
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(e[i] / sum);
  return out;
}

size_t likeliest_label(std::span<const float> probs) {
  return static_cast<size_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
}

}  // namespace troupe::serve
