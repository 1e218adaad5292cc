// Reranking as Qwen3-Reranker is used (its model card; vLLM serves it the same way): each
// (query, document) pair becomes one prompt, and the document's relevance is the probability the
// model gives "yes" over "no" as the answer's first token. Any Qwen3 chat model can be asked; the
// scores mean something for the reranker checkpoints (Qwen3-Reranker-0.6B/4B/8B).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::serve {

// The model card's default instruction, used when a request gives none.
inline constexpr std::string_view kDefaultRerankInstruction =
    "Given a web search query, retrieve relevant passages that answer the query";

// The model card's prompt, encoded as it encodes it: the system prefix, then
// "<Instruct>: I\n<Query>: Q\n<Document>: D", then the assistant suffix with an empty think block,
// each part tokenized on its own (added tokens such as <|im_start|> become their ids).
std::vector<int32_t> rerank_prompt(const tokenizer& tok, std::string_view instruction, std::string_view query,
                                   std::string_view document);

// The ids of the single tokens "yes" and "no", rows of a model of vocab_size rows named `model`;
// throws troupe::error(unsupported) naming the token the tokenizer lacks, or the model whose
// vocabulary stops before them.
struct rerank_tokens {
  int32_t yes = -1, no = -1;
  // A sequence classifier of one label (Qwen3ForSequenceClassification, as the Qwen3-Reranker
  // "seq-cls" conversions ship with score = lm_head[yes] - lm_head[no]): the logits row is that one
  // logit, and the score is its sigmoid (vLLM's).
  static rerank_tokens single_logit() { return {0, -1}; }
};
rerank_tokens rerank_tokens_of(const tokenizer& tok, int64_t vocab_size, std::string_view model);
// What a model of num_labels labels (model_config::num_labels; 0: a causal LM) reranks by:
// rerank_tokens_of, or single_logit() for a classifier of one label; a classifier of more labels
// cannot rerank (troupe::error unsupported, naming `model`).
rerank_tokens rerank_tokens_for(const tokenizer& tok, int64_t vocab_size, int64_t num_labels, std::string_view model);

// P(yes) from the logits row of the prompt's last token: exp(l_yes) / (exp(l_yes) + exp(l_no)),
// in double (a logistic of the difference, so never 0/0); single_logit(): 1 / (1 + exp(-l_0)),
// the same number when l_0 = l_yes - l_no.
double rerank_score(std::span<const float> logits, rerank_tokens t);

// A sequence classifier's label probabilities from its logits row (one per label), as vLLM's
// classify pooler gives them: the softmax of the row, or for a single label the sigmoid of its
// logit. Computed in double, returned in float32; an empty row or a NaN is an error.
std::vector<float> label_probs(std::span<const float> logits);
// The index of the largest probability (the first of equals).
size_t likeliest_label(std::span<const float> probs);

}  // namespace troupe::serve
