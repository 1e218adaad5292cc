// Embeddings from a Qwen3 model, as sentence-transformers and vLLM make them for Qwen3-Embedding:
// the final hidden state of the prompt's last token (last-token pooling; step logits_mode::hidden),
// optionally cut to its first `dimensions` values (Matryoshka: the models are trained so that a
// prefix is itself an embedding), then scaled to unit L2 length so that a dot product is the
// cosine similarity.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

struct embedding_options {
  bool normalize = true;   // unit L2 length (sentence-transformers' Normalize, vLLM's default)
  int32_t dimensions = 0;  // keep the first N values (before normalizing); 0 = all
};

// troupe::error(invalid_argument) for dimensions < 0 or larger than the state ("dimensions (N)
// exceeds the model's hidden_size (H)"): what finish_embedding checks, for callers that check first.
void check_embedding_options(const embedding_options& opts, int64_t hidden_size);

// The pooled state's embedding; throws as check_embedding_options(opts, pooled.size()).
std::vector<float> finish_embedding(std::span<const float> pooled, const embedding_options& opts);

}  // namespace troupe
