// The next token of every sequence of a step, picked as the engine picks it at temperature 0.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/engine/step.hpp"

namespace troupe::bench {

// next[s] = the greedy token of sequence s's first logits row in `res`, through the engine's own
// sampler (a vectorised max and first-hit scan, ~40 us per 151,936-entry row here). A plain
// std::max_element took ~0.5 ms a row: at batch 32 that was 8% of a decode step that the engine
// never spends, so the benches measured the stand-in, not Troupe.
void greedy_next(step_result& res, std::span<int32_t> next);

}  // namespace troupe::bench
