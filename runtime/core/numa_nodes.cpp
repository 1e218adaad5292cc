#include "runtime/core/numa_nodes.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <fstream>
#include <string>

namespace troupe {

int32_t count_list_entries(std::string_view list) {
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  if (list.empty()) return 0;
  int64_t count = 0;
  size_t at = 0;
  for (;;) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string_view item = list.substr(at, comma - at);
    const size_t dash = item.find('-');
    int64_t lo = 0, hi = 0;
    auto number = [](std::string_view t, int64_t& v) {
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return !t.empty() && ec == std::errc() && end == t.data() + t.size() && v >= 0;
    };
    if (dash == std::string_view::npos) {
      if (!number(item, lo)) return 0;
      hi = lo;
    } else if (!number(item.substr(0, dash), lo) || !number(item.substr(dash + 1), hi) || hi < lo) {
      return 0;
    }
    count += hi - lo + 1;
    if (comma == list.size()) break;
    at = comma + 1;
  }
  return static_cast<int32_t>(std::min<int64_t>(count, INT32_MAX));
}

int32_t numa_node_count() {
  std::ifstream f("/sys/devices/system/node/online");
  std::string line;
  if (!f || !std::getline(f, line)) return 1;
  const int32_t n = count_list_entries(line);
  return n > 0 ? n : 1;
}

}  // namespace troupe
