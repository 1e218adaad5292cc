// How many NUMA nodes this machine has: what decides whether pipeline stages can each have memory
// of their own (parallel_runner's schedule).
#pragma once

#include <cstdint>
#include <string_view>

namespace troupe {

// Entries of a Linux CPU / node list such as "0-3,8,10-11" (12 -> 7); 0 for an empty or malformed
// list.
int32_t count_list_entries(std::string_view list);

// The online NUMA nodes (/sys/devices/system/node/online); 1 where that file is missing or unreadable.
int32_t numa_node_count();

}  // namespace troupe
