#include "runtime/serve/metrics.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/core/prometheus.hpp"

namespace troupe::serve {

namespace {

using prometheus::family;
using prometheus::number;
using prometheus::sample;

// vLLM's buckets (vllm/v1/metrics/loggers.py), so dashboards carry over.
const std::vector<double> ttft_buckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> itl_buckets = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5,  10.0, 20.0, 40.0, 80.0};
const std::vector<double> latency_buckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,    10.0,   15.0, 20.0,
                                             30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
// vLLM's build_1_2_5_buckets for token counts (there up to max_model_len; here to a million,
// past any context Qwen3 has).
const std::vector<double> token_buckets = {1,    2,    5,    10,    20,    50,    100,    200,    500,    1000,
                                           2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000};

}  // namespace

histogram::histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double v) {
  auto i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];  // i == bounds_.size(): only the +Inf bucket
  ++count_;
  sum_ += v;
}

void histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cum = 0;
  std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    sample(out, name + "_bucket", labels + sep + "le=\"" + number(bounds_[i]) + "\"", std::to_string(cum));
  }
  sample(out, name + "_bucket", labels + sep + "le=\"+Inf\"", std::to_string(count_));
  sample(out, name + "_sum", labels, number(sum_));
  sample(out, name + "_count", labels, std::to_string(count_));
}

metrics::metrics(std::string model_name)
    : labels_("model_name=\"" + prometheus::escape_label(model_name) + "\""),
      ttft_(ttft_buckets),
      itl_(itl_buckets),
      e2e_(latency_buckets),
      queue_(latency_buckets),
      prompt_len_(token_buckets),
      generation_len_(token_buckets),
      prefill_(latency_buckets),
      decode_(latency_buckets),
      inference_(latency_buckets),
      iteration_tokens_(token_buckets),
      params_n_({1, 2, 5, 10, 20}),
      params_max_tokens_(token_buckets),
      max_generation_len_(token_buckets) {}

void metrics::set_queue_sizes(int64_t running, int64_t waiting) {
  std::lock_guard lock(mu_);
  running_ = running;
  waiting_ = waiting;
}
void metrics::set_kv_cache_usage(double f) {
  std::lock_guard lock(mu_);
  kv_usage_ = f;
}
void metrics::set_lora_requests(int64_t max_lora, std::string running, std::string waiting) {
  std::lock_guard lock(mu_);
  max_lora_ = max_lora;
  lora_running_ = std::move(running);
  lora_waiting_ = std::move(waiting);
}
void metrics::set_prefill_pacing(int32_t cap, double decode_step_seconds, double seconds_per_prompt_token) {
  std::lock_guard lock(mu_);
  prefill_cap_ = cap;
  decode_step_s_ = decode_step_seconds;
  prompt_token_s_ = seconds_per_prompt_token;
}
void metrics::add_preemptions(int64_t n) {
  std::lock_guard lock(mu_);
  preemptions_ += n;
}
void metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += n;
}
void metrics::add_generation_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  generation_tokens_ += n;
}
void metrics::add_spec_decode(int64_t drafts, int64_t accepted) {
  std::lock_guard lock(mu_);
  spec_drafts_ += drafts;
  spec_accepted_ += accepted;
  ++spec_steps_;
  // Drafts are accepted in order: this step's first `accepted` positions held.
  if (static_cast<int64_t>(spec_accepted_at_.size()) < drafts) spec_accepted_at_.resize(static_cast<size_t>(drafts), 0);
  for (int64_t j = 0; j < accepted; ++j) ++spec_accepted_at_[static_cast<size_t>(j)];
}
void metrics::add_finished(finished_reason_label why) {
  std::lock_guard lock(mu_);
  ++finished_[static_cast<size_t>(why)];
}
void metrics::observe_ttft(double s) {
  std::lock_guard lock(mu_);
  ttft_.observe(s);
}
void metrics::observe_inter_token(double s) {
  std::lock_guard lock(mu_);
  itl_.observe(s);
}
void metrics::observe_e2e(double s) {
  std::lock_guard lock(mu_);
  e2e_.observe(s);
}
void metrics::observe_queue(double s) {
  std::lock_guard lock(mu_);
  queue_.observe(s);
}
void metrics::observe_finished(const finished_request& r) {
  std::lock_guard lock(mu_);
  prompt_len_.observe(static_cast<double>(r.prompt_tokens));
  generation_len_.observe(static_cast<double>(r.generation_tokens));
  if (r.prefill_seconds) prefill_.observe(*r.prefill_seconds);
  if (r.decode_seconds) decode_.observe(*r.decode_seconds);
  if (r.inference_seconds) inference_.observe(*r.inference_seconds);
  if (r.max_tokens > 0) params_max_tokens_.observe(static_cast<double>(r.max_tokens));
}
void metrics::observe_request_n(int32_t n) {
  std::lock_guard lock(mu_);
  params_n_.observe(static_cast<double>(n));
}
void metrics::observe_max_generation_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  max_generation_len_.observe(static_cast<double>(n));
}
void metrics::set_cache_config(int32_t block_size, int64_t num_blocks, std::string cache_dtype, bool prefix_caching) {
  std::lock_guard lock(mu_);
  // vLLM's label names (its CacheConfig's fields): num_gpu_blocks is the KV pool's blocks on any
  // back-end (on the CPU one, in host memory), the blocks requests use.
  cache_config_labels_ = "block_size=\"" + std::to_string(block_size) + "\",cache_dtype=\"" +
                         prometheus::escape_label(cache_dtype) + "\",enable_prefix_caching=\"" +
                         (prefix_caching ? "True" : "False") + "\",num_gpu_blocks=\"" + std::to_string(num_blocks) + "\"";
}
void metrics::add_step(double engine_seconds, double loop_seconds, int64_t tokens) {
  std::lock_guard lock(mu_);
  iteration_tokens_.observe(static_cast<double>(tokens));
  ++steps_;
  step_tokens_ += tokens;
  engine_seconds_ += engine_seconds;
  loop_seconds_ += loop_seconds;
}
void metrics::set_client_connections(int64_t open) {
  std::lock_guard lock(mu_);
  connections_ = open;
}
void metrics::add_idle_closed(int64_t n) {
  std::lock_guard lock(mu_);
  idle_closed_ += n;
}
int64_t metrics::running() const {
  std::lock_guard lock(mu_);
  return running_;
}
int64_t metrics::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}
stats_sample metrics::stats() const {
  std::lock_guard lock(mu_);
  stats_sample s;
  s.prompt_tokens = prompt_tokens_;
  s.generation_tokens = generation_tokens_;
  s.preemptions = preemptions_;
  s.running = running_;
  s.waiting = waiting_;
  s.kv_cache_usage = kv_usage_;
  return s;
}

int64_t metrics::finished() const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (int64_t f : finished_) n += f;
  return n;
}

void metrics::add_renderer(std::function<void(std::string&, const std::string&)> fn) {
  std::lock_guard lock(mu_);
  renderers_.push_back(std::move(fn));
}

std::string metrics::render() const {
  std::lock_guard lock(mu_);
  std::string o;
  family(o, "num_requests_running", "gauge", "Number of requests in the running batch.");
  sample(o, "num_requests_running", labels_, std::to_string(running_));
  family(o, "num_requests_waiting", "gauge", "Number of requests waiting to be scheduled.");
  sample(o, "num_requests_waiting", labels_, std::to_string(waiting_));
  family(o, "kv_cache_usage_perc", "gauge", "KV-cache usage: 1 means 100 percent of the blocks are in use.");
  sample(o, "kv_cache_usage_perc", labels_, number(kv_usage_));
  if (max_lora_ > 0) {
    // vLLM's: the information is in the labels, the value is when it was taken (Unix seconds).
    family(o, "lora_requests_info", "gauge", "Running stats on LoRA requests.");
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    sample(o, "lora_requests_info",
           labels_ + ",max_lora=\"" + std::to_string(max_lora_) + "\",running_lora_adapters=\"" +
               prometheus::escape_label(lora_running_) + "\",waiting_lora_adapters=\"" +
               prometheus::escape_label(lora_waiting_) + "\"",
           number(now));
  }
  family(o, "prefill_tokens_while_decoding", "gauge",
       "Most prompt tokens the next step that also decodes may take (scheduler.decode_slowdown_percent).");
  sample(o, "prefill_tokens_while_decoding", labels_, std::to_string(prefill_cap_));
  family(o, "decode_step_seconds", "gauge", "Running average of a decode-only step's engine time.");
  sample(o, "decode_step_seconds", labels_, number(decode_step_s_));
  family(o, "prompt_token_step_seconds", "gauge", "Running average of what one prompt token adds to a step that decodes.");
  sample(o, "prompt_token_step_seconds", labels_, number(prompt_token_s_));
  family(o, "num_preemptions_total", "counter", "Cumulative number of preemptions.");
  sample(o, "num_preemptions_total", labels_, std::to_string(preemptions_));
  family(o, "prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  sample(o, "prompt_tokens_total", labels_, std::to_string(prompt_tokens_));
  family(o, "generation_tokens_total", "counter", "Number of generation tokens processed.");
  sample(o, "generation_tokens_total", labels_, std::to_string(generation_tokens_));
  // vLLM's speculative-decoding counters (num_drafts counts sequence-steps that carried drafts).
  family(o, "spec_decode_num_drafts_total", "counter", "Number of sequence-steps that carried draft tokens.");
  sample(o, "spec_decode_num_drafts_total", labels_, std::to_string(spec_steps_));
  family(o, "spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens verified.");
  sample(o, "spec_decode_num_draft_tokens_total", labels_, std::to_string(spec_drafts_));
  family(o, "spec_decode_num_accepted_tokens_total", "counter", "Number of draft tokens the model agreed with.");
  sample(o, "spec_decode_num_accepted_tokens_total", labels_, std::to_string(spec_accepted_));
  // vLLM's per-position acceptance: how far into the drafts guesses hold (positions seen so far).
  family(o, "spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.");
  for (size_t j = 0; j < spec_accepted_at_.size(); ++j)
    sample(o, "spec_decode_num_accepted_tokens_per_pos", labels_ + ",position=\"" + std::to_string(j) + "\"",
           std::to_string(spec_accepted_at_[j]));
  family(o, "request_success_total", "counter", "Count of finished requests by finish reason.");
  static const char* reasons[] = {"stop", "length", "abort", "error"};
  for (size_t i = 0; i < finished_.size(); ++i)
    sample(o, "request_success_total", labels_ + ",finished_reason=\"" + reasons[i] + "\"",
           std::to_string(finished_[i]));
  auto hist = [&](const char* name, const char* help, const histogram& h) {
    family(o, name, "histogram", help);
    h.render(o, name, labels_);
  };
  hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttft_);
  hist("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itl_);
  hist("e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", e2e_);
  hist("request_queue_time_seconds", "Histogram of time spent waiting in the queue in seconds.", queue_);
  hist("request_prompt_tokens", "Number of prefill tokens processed.", prompt_len_);
  hist("request_generation_tokens", "Number of generation tokens processed.", generation_len_);
  hist("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", prefill_);
  hist("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", decode_);
  hist("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", inference_);
  hist("iteration_tokens_total", "Histogram of number of tokens per engine_step.", iteration_tokens_);
  hist("request_params_n", "Histogram of the n request parameter.", params_n_);
  hist("request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.",
       max_generation_len_);
  hist("request_params_max_tokens", "Histogram of the max_tokens request parameter.", params_max_tokens_);
  // vLLM's older name for the inter-token latency, which its dashboards before 0.11 chart.
  hist("time_per_output_token_seconds", "Histogram of time per output token in seconds (inter_token_latency_seconds).", itl_);
  if (!cache_config_labels_.empty()) {
    family(o, "cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.");
    sample(o, "cache_config_info", labels_ + "," + cache_config_labels_, "1");
  }
  family(o, "engine_steps_total", "counter", "Forward steps run (troupe-specific).");
  sample(o, "engine_steps_total", labels_, std::to_string(steps_));
  family(o, "engine_step_tokens_total", "counter", "Tokens computed in forward steps (troupe-specific).");
  sample(o, "engine_step_tokens_total", labels_, std::to_string(step_tokens_));
  family(o, "engine_step_seconds_total", "counter", "Time inside the forward step and sampling (troupe-specific).");
  sample(o, "engine_step_seconds_total", labels_, number(engine_seconds_));
  family(o, "scheduler_loop_seconds_total", "counter",
       "Wall time from planning a step to its results applied: engine time plus runtime overhead (troupe-specific).");
  sample(o, "scheduler_loop_seconds_total", labels_, number(loop_seconds_));
  family(o, "client_connections", "gauge", "Open client connections (troupe-specific).");
  sample(o, "client_connections", labels_, std::to_string(connections_));
  family(o, "idle_connections_closed_total", "counter",
         "Client connections closed after idle_timeout_ms with nothing running (troupe-specific).");
  sample(o, "idle_connections_closed_total", labels_, std::to_string(idle_closed_));
  for (const auto& r : renderers_) r(o, labels_);
  return o;
}

}  // namespace troupe::serve
