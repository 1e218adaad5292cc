// Whole-row passes: written so GCC vectorises the elementwise ones (see CMakeLists.txt for
// -fno-trapping-math); the order-dependent sums run in fixed blocks so results never depend on
// anything but the row.
#include "runtime/sampling/row.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/sampling/fast_exp.hpp"

namespace troupe::sampling_detail {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// dense_cutoff's histogram: buckets of 1/128 nat below the maximum, 32 nats in all; everything
// further down shares the last bucket. Its tokens hold at most vocab * e^-32 of the top token's
// mass (3e-9 of it at vocab 151936), so top-p never cuts inside it for any top_p below 1 that a
// float can hold. A large top-k can (it counts tokens, not mass): then the bucket is gathered
// whole and only its needed best are selected with nth_element, never sorted.
constexpr int kBuckets = 4096;
constexpr float kBucketsPerNat = 128.0f;
// Four interleaved histograms: consecutive tokens in one bucket (the common case: the long tail)
// would otherwise chain every add through the same memory slot.
constexpr int kLanes = 4;

// min() before the conversion: a -inf logit gives d = +inf, which must not reach the cast.
inline uint16_t bucket_of(float logit, float max) {
  const float d = std::min((max - logit) * kBucketsPerNat, static_cast<float>(kBuckets - 1));
  return static_cast<uint16_t>(static_cast<int32_t>(d));
}

// Sums for draw_dense; 1024 tokens a block keeps the final in-block walk short.
constexpr int64_t kBlock = 1024;

[[noreturn]] void reject_logit(std::span<const float> logits) {
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(logits[i] < kInf)) {
      throw_error(errc::invalid_input,
                  "logits[" + std::to_string(i) + "] is " + (logits[i] > 0 ? "+inf" : "nan") +
                      " (after penalties and temperature): a row must hold finite values or "
                      "-inf");
    }
  }
  throw_error(errc::internal, "reject_logit called on a valid row");
}

}  // namespace

void exp_row_baseline(const float* in, float max, float* out, int64_t n) {
  fast_exp_shifted(in, max, out, n);
}

// The widest whole-row pass, so the one given an AVX2 build. "avx2" only, not "fma": with FMA
// GCC would contract the polynomial and the weights would differ from the baseline's.
__attribute__((target("avx2"))) void exp_row_avx2(const float* in, float max, float* out,
                                                   int64_t n) {
  fast_exp_shifted(in, max, out, n);
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

void exp_row(const float* in, float max, float* out, int64_t n) {
  if (cpu_has_avx2())
    exp_row_avx2(in, max, out, n);
  else
    exp_row_baseline(in, max, out, n);
}

float checked_max(std::span<const float> logits) {
  TROUPE_ASSERT(!logits.empty());
  int32_t max_key = std::numeric_limits<int32_t>::min();
  int bad = 0;
  for (const float l : logits) {
    max_key = std::max(max_key, order_key(l));
    bad |= !(l < kInf);  // NaN or +inf
  }
  if (bad) reject_logit(logits);
  const float max = from_order_key(max_key);
  if (max == -kInf)
    throw_error(errc::invalid_input, "every one of the " + std::to_string(logits.size()) +
                                         " logits is -inf: no token can be sampled");
  return max;
}

int32_t argmax(std::span<const float> logits, float max) {
  const float* lg = logits.data();
  const int64_t n = static_cast<int64_t>(logits.size());
  constexpr int64_t kScan = 64;  // a vectorised "any" per block, then the first hit in it
  for (int64_t lo = 0; lo < n; lo += kScan) {
    const int64_t hi = std::min(n, lo + kScan);
    int any = 0;
    for (int64_t i = lo; i < hi; ++i) any |= lg[i] == max;
    if (!any) continue;
    for (int64_t i = lo; i < hi; ++i)
      if (lg[i] == max) return static_cast<int32_t>(i);
  }
  TROUPE_ASSERT(false && "argmax: the maximum is not in the row");
  return -1;
}

namespace {

// Appends (logit, id) of every token in bucket `wanted`. Most 64-token blocks hold none of them
// when the bucket is near the top: a vectorised "any" skips those blocks.
void gather_bucket(const float* lg, const uint16_t* bucket, int64_t n, int wanted,
                   std::vector<candidate>& out) {
  const uint16_t target = static_cast<uint16_t>(wanted);
  out.clear();
  constexpr int64_t kScan = 64;
  for (int64_t lo = 0; lo < n; lo += kScan) {
    const int64_t hi = std::min(n, lo + kScan);
    int any = 0;
    for (int64_t j = lo; j < hi; ++j) any |= bucket[j] == target;
    if (!any) continue;
    for (int64_t j = lo; j < hi; ++j)
      if (bucket[j] == target) out.emplace_back(lg[j], static_cast<int32_t>(j));
  }
}

}  // namespace

cutoff dense_cutoff(std::span<const float> logits, std::span<const float> w, float max,
                    int64_t top_k, float top_p, std::vector<candidate>& scratch) {
  TROUPE_ASSERT(logits.size() == w.size());
  const int64_t n = static_cast<int64_t>(logits.size());
  TROUPE_ASSERT(top_k >= 0 && top_k <= n);
  const bool use_k = top_k > 0 && top_k < n;
  const float* lg = logits.data();
  const float* wt = w.data();
  // Bucket ids first, in a pass GCC vectorises; the histograms and gathers below reuse them.
  // (Raw pointers throughout: through the vectors GCC reloads data() after every store.)
  thread_local std::vector<uint16_t> bucket_store;
  bucket_store.resize(static_cast<size_t>(n));
  uint16_t* bucket = bucket_store.data();
  for (int64_t i = 0; i < n; ++i) bucket[i] = bucket_of(lg[i], max);

  thread_local std::vector<double> mass_lanes;
  thread_local std::vector<uint32_t> count_lanes;
  mass_lanes.assign(static_cast<size_t>(kLanes * kBuckets), 0.0);
  double* ml = mass_lanes.data();
  if (use_k) {
    count_lanes.assign(static_cast<size_t>(kLanes * kBuckets), 0);
    uint32_t* cl = count_lanes.data();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) {
        ml[k * kBuckets + bucket[i + k]] += wt[i + k];
        ++cl[k * kBuckets + bucket[i + k]];
      }
    for (; i < n; ++i) {
      ml[bucket[i]] += wt[i];
      ++cl[bucket[i]];
    }
  } else {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) ml[k * kBuckets + bucket[i + k]] += wt[i + k];
    for (; i < n; ++i) ml[bucket[i]] += wt[i];
  }
  std::array<double, kBuckets> mass;
  for (int b = 0; b < kBuckets; ++b)
    mass[b] = (ml[b] + ml[kBuckets + b]) + (ml[2 * kBuckets + b] + ml[3 * kBuckets + b]);

  // top-k: every bucket before k_bucket is in; of k_bucket, its k_need best tokens, which end
  // up sorted at the front of scratch. total = the mass top-p measures against.
  int k_bucket = kBuckets;
  int64_t k_need = 0;
  double total = 0.0;
  cutoff cut;
  if (use_k) {
    const uint32_t* cl = count_lanes.data();
    int64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      const int64_t count = int64_t{cl[b]} + cl[kBuckets + b] + cl[2 * kBuckets + b] +
                            cl[3 * kBuckets + b];
      if (seen + count >= top_k) {
        k_bucket = b;
        k_need = top_k - seen;
        break;
      }
      seen += count;
      total += mass[b];
    }
    TROUPE_ASSERT(k_bucket < kBuckets);  // top_k < n, and every token has a bucket
    gather_bucket(lg, bucket, n, k_bucket, scratch);
    TROUPE_ASSERT(static_cast<int64_t>(scratch.size()) >= k_need);
    // Only the k_need best of the bucket matter; the last bucket can hold most of the vocab,
    // so select them first and sort just those.
    auto need_end = scratch.begin() + k_need;
    if (need_end != scratch.end())
      std::nth_element(scratch.begin(), need_end - 1, scratch.end(), by_rank{});
    std::sort(scratch.begin(), need_end, by_rank{});
    scratch.resize(static_cast<size_t>(k_need));
    for (const candidate& c : scratch) total += wt[c.second];
    cut = {scratch.back().first, scratch.back().second};
  } else {
    for (int b = 0; b < kBuckets; ++b) total += mass[b];
  }
  if (!(top_p < 1.0f)) return cut;

  // top-p: the bucket where the running mass first reaches the target, then the token in it.
  const double target = static_cast<double>(top_p) * total;
  double running = 0.0, p_before = 0.0;
  int p_bucket = -1;  // the last non-empty bucket looked at
  bool reached = false;
  for (int b = 0; b < k_bucket; ++b) {
    if (mass[b] <= 0.0) continue;
    p_bucket = b;
    p_before = running;
    if (running + mass[b] >= target) {
      reached = true;
      break;
    }
    running += mass[b];
  }
  if (!reached && use_k) {
    // The target lies among the top-k bucket's kept tokens (sorted in scratch).
    double cum = running;
    for (const candidate& c : scratch) {
      cum += wt[c.second];
      if (cum >= target) return {c.first, c.second};
    }
    return cut;
  }
  // Without top-k the maximum's bucket 0 has mass; if rounding kept the running sum just short
  // of the target, the cut lands inside the last non-empty bucket.
  TROUPE_ASSERT(p_bucket >= 0);
  gather_bucket(lg, bucket, n, p_bucket, scratch);
  TROUPE_ASSERT(!scratch.empty());
  std::sort(scratch.begin(), scratch.end(), by_rank{});
  double cum = p_before;
  for (const candidate& c : scratch) {
    cum += wt[c.second];
    if (cum >= target) return {c.first, c.second};
  }
  return {scratch.back().first, scratch.back().second};
}

int32_t draw_dense(std::span<const float> logits, std::span<float> w, float max,
                   const cutoff& cut, float min_p_log, double u) {
  TROUPE_ASSERT(logits.size() == w.size());
  TROUPE_ASSERT(logits.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  const int64_t n = static_cast<int64_t>(logits.size());
  if (cut.logit > -kInf || min_p_log > -kInf) {
    // Bitwise &, |, a 32-bit index and the cutoff in locals (a store to w could alias `cut`):
    // no branches, so the loop vectorises.
    const int32_t n32 = static_cast<int32_t>(n);
    const float cut_logit = cut.logit;
    const int32_t cut_id = cut.id;
    for (int32_t i = 0; i < n32; ++i) {
      const float l = logits[i];
      const bool keep =
          ((l > cut_logit) | ((l == cut_logit) & (i <= cut_id))) & (l - max >= min_p_log);
      w[i] = keep ? w[i] : 0.0f;
    }
  }

  const int64_t num_blocks = (n + kBlock - 1) / kBlock;
  thread_local std::vector<double> block_mass;
  block_mass.resize(static_cast<size_t>(num_blocks));
  double total = 0.0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    double s[4] = {0.0, 0.0, 0.0, 0.0};  // four chains: a single one is latency-bound
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4)
      for (int k = 0; k < 4; ++k) s[k] += w[i + k];
    for (; i < hi; ++i) s[0] += w[i];
    block_mass[b] = (s[0] + s[1]) + (s[2] + s[3]);
    total += block_mass[b];
  }
  TROUPE_ASSERT(total > 0.0);  // the maximum is always kept with weight 1

  const double target = u * total;
  double running = 0.0;
  int64_t block = -1;
  double before = 0.0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    if (block_mass[b] <= 0.0) continue;
    block = b;
    before = running;
    if (running + block_mass[b] > target) break;
    running += block_mass[b];
  }
  // In-block walk; its sum may round differently from the block sum, so fall back to the
  // block's last token with weight.
  const int64_t lo = block * kBlock, hi = std::min(n, lo + kBlock);
  double cum = before;
  int64_t last = -1;
  for (int64_t i = lo; i < hi; ++i) {
    if (w[i] <= 0.0f) continue;
    last = i;
    cum += w[i];
    if (cum > target) return static_cast<int32_t>(i);
  }
  TROUPE_ASSERT(last >= 0);
  return static_cast<int32_t>(last);
}

}  // namespace troupe::sampling_detail
