// The server's Prometheus metrics (text format 0.0.4) under vLLM's names with a `troupe:` prefix.
// Thread-safe: the scheduler and gateway record, the metrics endpoint renders.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/serve/stats_log.hpp"

namespace troupe::serve {

class histogram {
 public:
  explicit histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Prometheus lines for `name` with `labels` ("model_name=\"x\"").
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const noexcept { return count_; }
  double sum() const noexcept { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0;
};

enum class finished_reason_label : uint8_t { stop, length, abort, error };

// A finished request, for vLLM's per-request histograms: its prompt and generated tokens, and
// (when it was scheduled) the times from its first scheduling to its first token (prefill), from
// that token to its end (decode), and from its first scheduling to its end (inference).
struct finished_request {
  int64_t prompt_tokens = 0, generation_tokens = 0;
  std::optional<double> prefill_seconds, decode_seconds, inference_seconds;
  int32_t max_tokens = 0;  // the request's max_tokens (0: none, an embed or rerank)
};

class metrics {
 public:
  explicit metrics(std::string model_name);

  void set_queue_sizes(int64_t running, int64_t waiting);
  void set_kv_cache_usage(double fraction);
  // LoRA (vLLM's lora_requests_info): the adapters loaded (0: the metric is not rendered) and the
  // names, comma-separated, of those with running / waiting requests.
  void set_lora_requests(int64_t max_lora, std::string running, std::string waiting);
  // The prefill pacer's view (runtime/sched/prefill_pacer.hpp): prompt-token cap of steps that
  // also decode, and the step costs it is computed from.
  void set_prefill_pacing(int32_t cap, double decode_step_seconds, double seconds_per_prompt_token);
  void add_preemptions(int64_t n);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  // Speculative decoding: draft tokens a step verified, and how many of them the model agreed with.
  void add_spec_decode(int64_t drafts, int64_t accepted);
  void add_finished(finished_reason_label why);
  void observe_ttft(double seconds);
  void observe_inter_token(double seconds);
  void observe_e2e(double seconds);
  void observe_queue(double seconds);
  void observe_finished(const finished_request& r);
  // A generate request's n (vLLM's request_params_n), once per prompt.
  void observe_request_n(int32_t n);
  // vLLM's request_max_num_generation_tokens: once a prompt's n completions have all ended, the
  // most tokens one of them generated.
  void observe_max_generation_tokens(int64_t n);
  // vLLM's cache_config_info: the KV cache's settings as labels (rendered once set).
  void set_cache_config(int32_t block_size, int64_t num_blocks, std::string cache_dtype, bool prefix_caching);
  void add_step(double engine_seconds, double loop_seconds, int64_t batched_tokens);
  // The gateway's connections: how many are open, and those it closed for idle_timeout_ms.
  void set_client_connections(int64_t open);
  void add_idle_closed(int64_t n);

  std::string render() const;
  // Appends what another component renders (e.g. the scheduling policy's metrics) to render();
  // `fn` gets the output and this registry's labels and must be thread-safe.
  void add_renderer(std::function<void(std::string&, const std::string& labels)> fn);
  int64_t running() const;
  int64_t waiting() const;
  // Requests finished for any reason since start.
  int64_t finished() const;
  // The counters and gauges the periodic log line reports (stats_log.hpp); its time and prefix
  // cache fields are left for the caller.
  stats_sample stats() const;

 private:
  mutable std::mutex mu_;
  std::string labels_;
  int64_t running_ = 0, waiting_ = 0;
  double kv_usage_ = 0;
  int64_t max_lora_ = 0;
  std::string lora_running_, lora_waiting_;
  int32_t prefill_cap_ = 0;
  double decode_step_s_ = 0, prompt_token_s_ = 0;
  int64_t preemptions_ = 0, prompt_tokens_ = 0, generation_tokens_ = 0;
  int64_t spec_drafts_ = 0, spec_accepted_ = 0, spec_steps_ = 0;
  std::vector<int64_t> spec_accepted_at_;  // [j]: steps whose draft j (0-based) was accepted
  std::array<int64_t, 4> finished_{};
  int64_t steps_ = 0, step_tokens_ = 0;
  int64_t connections_ = 0, idle_closed_ = 0;
  double engine_seconds_ = 0, loop_seconds_ = 0;
  histogram ttft_, itl_, e2e_, queue_;
  histogram prompt_len_, generation_len_, prefill_, decode_, inference_, iteration_tokens_;
  histogram params_n_, params_max_tokens_, max_generation_len_;
  std::string cache_config_labels_;  // empty until set_cache_config
  std::vector<std::function<void(std::string&, const std::string&)>> renderers_;
};

}  // namespace troupe::serve
