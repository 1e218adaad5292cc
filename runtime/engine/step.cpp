// validate_step (step.hpp): the batch checks every runner makes before touching its KV pool.
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/engine/step.hpp"

namespace troupe {

void validate_step(std::span<const step_sequence> batch, const model_config& cfg, int64_t num_blocks,
                   int64_t bs, int64_t num_adapters) {
  for (size_t s = 0; s < batch.size(); ++s) {
    const auto& sq = batch[s];
    const std::string who = "step: sequence " + std::to_string(sq.seq_id);
    if (sq.tokens.empty()) throw_error(errc::invalid_input, who + " has no tokens");
    if (sq.start_pos < 0) throw_error(errc::invalid_input, who + " has a negative start position");
    if (sq.adapter < -1 || sq.adapter >= num_adapters)
      throw_error(errc::out_of_range, who + " asks for LoRA adapter slot " + std::to_string(sq.adapter) +
                                          "; this runner holds " + std::to_string(num_adapters) +
                                          " adapter(s) (-1: the base model)");
    const int64_t end = sq.start_pos + static_cast<int64_t>(sq.tokens.size());
    if (cfg.context_length() > 0 && end > cfg.context_length())
      throw_error(errc::out_of_range, who + " reaches position " + std::to_string(end) +
                                          "; the model supports " + std::to_string(cfg.context_length()));
    for (int32_t id : sq.tokens)
      if (id < 0 || id >= cfg.vocab_size)
        throw_error(errc::out_of_range, who + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                            std::to_string(cfg.vocab_size) + ")");
    const int64_t need = (end + bs - 1) / bs;
    if (static_cast<int64_t>(sq.block_table.size()) < need)
      throw_error(errc::invalid_input, who + ": block table has " + std::to_string(sq.block_table.size()) +
                                           " blocks; positions up to " + std::to_string(end) + " need " +
                                           std::to_string(need));
    for (int64_t b = 0; b < need; ++b)
      if (sq.block_table[b] < 0 || sq.block_table[b] >= num_blocks)
        throw_error(errc::out_of_range, who + ": block id " + std::to_string(sq.block_table[b]) +
                                            " is outside the KV pool of " + std::to_string(num_blocks) + " blocks");
  }
}

}  // namespace troupe
