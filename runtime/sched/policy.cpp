#include "runtime/sched/policy.hpp"

#include "runtime/core/error.hpp"

namespace troupe::sched {

std::unique_ptr<policy> make_policy(std::string_view name) {
  if (name == "fcfs") return std::make_unique<fcfs_policy>();
  if (name == "priority") return std::make_unique<priority_policy>();
  throw_error(errc::invalid_argument,
              "unknown scheduling policy '" + std::string(name) + "'; expected fcfs or priority");
}

}  // namespace troupe::sched
