#include "tools/troupe/ids_flag.hpp"

#include <climits>
#include <sstream>

#include "runtime/core/error.hpp"

namespace troupe::cli {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      throw_error(errc::invalid_argument, "--ids: '" + item + "' is not a token id (expected e.g. --ids 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw_error(errc::invalid_argument, "--ids: no token ids given");
  return ids;
}

void check_ids_in_vocab(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& what) {
  for (int32_t id : ids)
    if (id >= vocab_size)
      throw_error(errc::out_of_range, what + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                          std::to_string(vocab_size) + ")");
}

}  // namespace troupe::cli
