// Spawn function of the supervisor (see supervisor.cpp for what it restarts and how).
#pragma once

#include <caf/fwd.hpp>

#include "actors/context.hpp"

namespace troupe::actors {

caf::actor spawn_supervisor(caf::actor_system& sys, context_ptr ctx);

}  // namespace troupe::actors
