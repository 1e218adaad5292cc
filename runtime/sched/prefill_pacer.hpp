// Sizes the prompt tokens of a step that also decodes from measured step times, so that such a
// step takes at most (1 + slowdown) times a decode-only step. Every decoding stream waits for the
// whole step, so this is what keeps inter-token latency bounded while long prompts arrive; a fixed
// token cap cannot do it everywhere, because what a prompt token costs against a decode step
// depends on the model, the machine and how long the prompt's context already is (attention).
//
// Model: step time = a(decodes) + b * prompt_tokens, where a (a decode-only step, a weighted line
// in the number of decodes: more streams read more KV and, past the weights' read, compute more)
// and b (one more prompt token) are running fits of what the engine reported. Before a decode-only step is seen the
// cap is the configured maximum; with a known and b not yet, the floor (the first mixed step
// measures b without a latency spike).
//
// When the decode-only steps seen lately all had one size (one stream decoding alone, then many
// arriving at once: every later step also prefills, so no decode-only step of the new size comes),
// a(d) has no slope to go on. A decode then costs what a short-context prompt token costs (each is
// one more row through every linear layer, which dominates the step): a(d) = a(seen) + r * (d -
// seen), r measured like b but only on steps whose prompt tokens attend to few keys. Without the
// extra rows, a(1) stood for a(16), b took the 15 extra decodes' time, and the cap fell to the
// floor: 16 streams got a new 64-token prompt in only after 8 steps. With r = b (before r was
// kept apart), a prompt token late in a 4,000-token prompt (attention over 3,500 keys: 3x a
// short row on a 0.6B model) priced the 14 extra decodes at 3x their cost, and mixed steps ran at
// 3.3x a decode step instead of 2x (docs/benchmarks.md, Serving, AVX2).
#pragma once

#include <cstdint>

namespace troupe::sched {

class prefill_pacer {
 public:
  // slowdown <= 0: off (cap() is always max_tokens). min_tokens keeps a long prompt moving when
  // even one prompt token costs more than the allowed slowdown.
  prefill_pacer(double slowdown, int32_t max_tokens, int32_t min_tokens = 8);

  // Prompt tokens that attend to at most this many keys cost about what a decode row of a short
  // context costs (attention is a few percent of the linear layers there, on any Qwen3).
  static constexpr int32_t kShortSpan = 128;

  // One finished step: its decodes (one token each), its prompt tokens, the engine's seconds, and
  // the furthest position its prompt tokens reach (start + length of its longest-context chunk;
  // 0 when unknown, taken as short).
  void observe(int32_t num_decodes, int32_t num_prompt_tokens, double seconds, int32_t prompt_span = 0);
  // Prompt tokens allowed in the next step that decodes.
  int32_t cap() const noexcept;

  // a at the latest step's number of decodes; 0 until measured.
  double decode_step_seconds() const noexcept;
  double seconds_per_prompt_token() const noexcept { return per_token_s_; }  // b; 0 until measured
  // r: b measured on short-context steps only (falls back to b until one is seen).
  double seconds_per_decode_row() const noexcept { return row_s_ > 0 ? row_s_ : per_token_s_; }

 private:
  double slowdown_;
  int32_t max_tokens_, min_tokens_;
  // Exponentially weighted least squares of decode-only step time against the number of decodes.
  struct decode_fit {
    double w = 0, sd = 0, st = 0, sdd = 0, sdt = 0;
    void add(double d, double t);
    double variance() const;  // of the numbers of decodes seen (w > 0)
    bool has_slope() const;   // more than one number of decodes seen lately
    double mean_decodes() const { return w > 0 ? sd / w : 0; }
    // row_s: the slope to assume when there is none (has_slope() false).
    double at(double d, double row_s) const;
  };
  decode_fit decode_;
  int32_t last_decodes_ = 1;
  double per_token_s_ = 0, row_s_ = 0;
};

}  // namespace troupe::sched
