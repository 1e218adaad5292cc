#include "runtime/sched/policy.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe::sched {

void policy::admit_order(std::span<const int64_t> waiting, size_t max, std::vector<int64_t>& out) {
  out.insert(out.end(), waiting.begin(), waiting.begin() + static_cast<ptrdiff_t>(std::min(max, waiting.size())));
}

std::unique_ptr<policy> make_policy(std::string_view name) {
  if (name == "fcfs") return std::make_unique<fcfs_policy>();
  if (name == "priority") return std::make_unique<priority_policy>();
  throw_error(errc::invalid_argument,
              "unknown scheduling policy '" + std::string(name) + "'; expected fcfs or priority");
}

}  // namespace troupe::sched
