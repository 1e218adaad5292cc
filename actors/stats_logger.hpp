// The periodic stats line (vLLM's log_stats; serve::stats_log): an actor that samples the
// metrics every [server] log_stats_interval_ms and hands the line to a sink (stderr by default).
#pragma once

#include <caf/fwd.hpp>
#include <functional>
#include <string>

#include "actors/context.hpp"

namespace troupe::actors {

caf::actor spawn_stats_logger(caf::actor_system& sys, context_ptr ctx, std::function<void(const std::string&)> sink);

}  // namespace troupe::actors
