// The one interface everything drives (architecture.md): a batched, paged forward step.
// Each sequence brings its tokens for this step (a prompt chunk or one decode token), the
// position of the first, and its block table; the step writes their K/V into the pool and
// returns the logits rows the caller asked for. Outputs of one sequence never depend on the
// rest of the batch, nor on how its prompt was chunked (bit-identical).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/config.hpp"

namespace troupe {

enum class logits_mode : uint8_t {
  none,  // mid-prompt chunk: only K/V are needed
  last,  // the row of the last token (end of prompt, or decode)
  all,   // every token of the chunk (troupe logits, scoring)
  // No logits: the last token's final hidden state (after the model's last RMSNorm, what Hugging
  // Face calls last_hidden_state), for embedding models that pool the last token (Qwen3-Embedding).
  hidden,
};

struct step_sequence {
  int64_t seq_id = 0;                    // the caller's id, echoed in the result
  std::span<const int32_t> tokens;       // >= 1 token
  int32_t start_pos = 0;                 // position of tokens[0]; K/V of 0..start_pos-1 are cached
  std::span<const int32_t> block_table;  // covers positions [0, start_pos + tokens.size())
  logits_mode logits = logits_mode::last;
  int32_t adapter = -1;                  // a LoRA adapter slot of the runner (model_runner::add_adapter); -1: none
};

struct step_result {
  int64_t vocab_size = 0;
  std::vector<float> logits;          // rows of vocab_size floats, sequences in batch order
  std::vector<int64_t> first_row;     // per sequence: index of its first row in `logits`
  std::vector<int64_t> num_rows;      // per sequence: 0, 1 or tokens.size()
  std::span<const float> row(size_t seq, int64_t r = 0) const {
    return {logits.data() + (first_row[seq] + r) * vocab_size, static_cast<size_t>(vocab_size)};
  }
  // logits_mode::hidden: rows of hidden_size floats, in batch order; hidden_row[seq] is the
  // sequence's row, -1 for the others.
  int64_t hidden_size = 0;
  std::vector<float> hidden;
  std::vector<int64_t> hidden_row;
  std::span<const float> hidden_of(size_t seq) const {
    return {hidden.data() + hidden_row[seq] * hidden_size, static_cast<size_t>(hidden_size)};
  }
};

// Checks a batch before any KV is touched (every runner, CPU or CUDA, calls it): tokens present,
// positions within max_position_embeddings, ids inside the vocabulary, block tables long enough
// and naming blocks inside a pool of num_blocks blocks of block_size tokens, adapter slots below
// num_adapters. Throws troupe::error (invalid_input / out_of_range) naming the sequence and what
// is wrong.
void validate_step(std::span<const step_sequence> batch, const model_config& cfg, int64_t num_blocks,
                   int64_t block_size, int64_t num_adapters = 0);

}  // namespace troupe
