#include "runtime/sched/prefill_pacer.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::sched {

namespace {
// Weight of the newest measurement: a few steps to follow a changing batch or a growing context,
// not so few that one noisy step moves the cap far.
constexpr double kAlpha = 0.25;
constexpr double kDecay = 1.0 - kAlpha;

double average(double old, double x) { return old > 0 ? old + kAlpha * (x - old) : x; }
}  // namespace

void prefill_pacer::decode_fit::add(double d, double t) {
  w = w * kDecay + 1;
  sd = sd * kDecay + d;
  st = st * kDecay + t;
  sdd = sdd * kDecay + d * d;
  sdt = sdt * kDecay + d * t;
}

double prefill_pacer::decode_fit::variance() const {
  const double md = sd / w;
  return sdd / w - md * md;
}

bool prefill_pacer::decode_fit::has_slope() const { return w > 0 && variance() >= 1e-6; }

double prefill_pacer::decode_fit::at(double d, double row_s) const {
  if (w <= 0) return 0;
  const double md = sd / w, mt = st / w;
  const double slope = has_slope() ? std::max((sdt / w - md * mt) / variance(), 0.0) : row_s;
  return std::max(mt + slope * (d - md), mt * 0.1);
}

prefill_pacer::prefill_pacer(double slowdown, int32_t max_tokens, int32_t min_tokens)
    : slowdown_(slowdown), max_tokens_(std::max(max_tokens, 1)), min_tokens_(std::clamp(min_tokens, 1, max_tokens_)) {}

void prefill_pacer::observe(int32_t num_decodes, int32_t num_prompt_tokens, double seconds, int32_t prompt_span) {
  if (!(seconds > 0) || !std::isfinite(seconds) || num_decodes < 0 || num_prompt_tokens < 0) return;
  if (num_decodes > 0) last_decodes_ = num_decodes;
  if (num_prompt_tokens == 0) {
    if (num_decodes > 0) decode_.add(num_decodes, seconds);
    return;
  }
  // A prompt-only step says nothing about the decode part; one with decodes, before a decode-only
  // step was seen, cannot be split either.
  if (num_decodes == 0 || decode_.w <= 0) return;
  if (decode_.has_slope()) {
    per_token_s_ = average(per_token_s_, std::max(seconds - decode_.at(num_decodes, 0), 0.0) / num_prompt_tokens);
    return;
  }
  // One decode-only size seen (md): the decodes past it are priced like short-context prompt
  // tokens. Fewer decodes than md cannot be split without the price being sought (a feedback that
  // need not settle): such a step is skipped.
  const double md = decode_.mean_decodes();
  if (num_decodes < md - 1e-9) return;
  const double extra_time = std::max(seconds - decode_.at(md, 0), 0.0), extra_rows = num_decodes - md;
  const bool short_span = prompt_span <= kShortSpan;
  if (short_span || row_s_ <= 0) {
    // Every row of the step costs about the same (or r is not known yet): spread the time evenly.
    const double price = extra_time / (num_prompt_tokens + extra_rows);
    per_token_s_ = average(per_token_s_, price);
    if (short_span) row_s_ = average(row_s_, price);
  } else {
    // Long-context prompt tokens beside decodes: the decodes keep the short-row price, the prompt
    // tokens pay the rest.
    per_token_s_ = average(per_token_s_, std::max(extra_time - row_s_ * extra_rows, 0.0) / num_prompt_tokens);
  }
}

double prefill_pacer::decode_step_seconds() const noexcept {
  return decode_.at(last_decodes_, seconds_per_decode_row());
}

int32_t prefill_pacer::cap() const noexcept {
  const double decode_s = decode_step_seconds();
  if (slowdown_ <= 0 || decode_s <= 0) return max_tokens_;
  // Decode steps measured, a prompt token's cost not yet: probe with the floor rather than risk
  // one step at the full cap (each decoding stream would see it as a latency spike).
  if (per_token_s_ <= 0) return min_tokens_;
  const double tokens = std::floor(slowdown_ * decode_s / per_token_s_ + 1e-6);  // 19.99999 is 20
  return static_cast<int32_t>(std::clamp<double>(tokens, min_tokens_, max_tokens_));
}

}  // namespace troupe::sched
