#include "bench/common/greedy.hpp"

#include "runtime/sampling/sampler.hpp"

namespace troupe::bench {

void greedy_next(step_result& res, std::span<int32_t> next) {
  sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.has_seed = true;  // no std::random_device read per call; greedy never draws on it anyway
  sampler smp(greedy);
  for (size_t s = 0; s < next.size(); ++s) {
    std::span<float> row(res.logits.data() + res.first_row[s] * res.vocab_size, static_cast<size_t>(res.vocab_size));
    next[s] = smp.sample(row, {}, {});
  }
}

}  // namespace troupe::bench
