// The one order every filter uses: logit descending, then token id ascending. top-k, top-p and
// min-p each keep a prefix of it, so the kept set is always "everything up to a cutoff".
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <utility>

namespace troupe::sampling_detail {

using candidate = std::pair<float, int32_t>;  // (logit, token id)

inline bool better(const candidate& a, const candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// `better` as a type, so std::sort / nth_element inline it (a function pointer is not inlined).
struct by_rank {
  bool operator()(const candidate& a, const candidate& b) const { return better(a, b); }
};

// The last kept token; every token ranked at or before it is kept.
struct cutoff {
  float logit = -std::numeric_limits<float>::infinity();
  int32_t id = std::numeric_limits<int32_t>::max();  // default: keeps every token
};

inline bool within(float logit, int64_t id, const cutoff& c) {
  return logit > c.logit || (logit == c.logit && id <= c.id);
}

inline cutoff stricter(const cutoff& a, const cutoff& b) {
  return better({a.logit, a.id}, {b.logit, b.id}) ? a : b;
}

// Signed-integer key with the same order as the float (no NaN): integer max vectorises where
// a float max reduction does not without -ffast-math.
inline int32_t order_key(float v) {
  const int32_t k = std::bit_cast<int32_t>(v);
  return k ^ ((k >> 31) & 0x7FFFFFFF);
}
inline float from_order_key(int32_t k) { return std::bit_cast<float>(k ^ ((k >> 31) & 0x7FFFFFFF)); }

}  // namespace troupe::sampling_detail
