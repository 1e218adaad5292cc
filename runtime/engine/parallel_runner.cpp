#include "runtime/engine/parallel_runner.hpp"

#include <algorithm>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/engine/omp_threads.hpp"

namespace troupe {

namespace {

// Wavefront stages each get an equal share of the threads, and at least one per rank (on a machine
// with fewer cores than ranks the threads then outnumber the cores, as tp_group's default does).
int32_t stage_threads(const parallel_config& p) {
  const int32_t all = p.threads > 0 ? p.threads : omp_threads_now();
  return std::max(p.size, all / p.pipeline_size);
}

// A wavefront of m equal parts over S stages keeps the stages busy m / (m + S - 1) of the time, so
// more parts fill the pipeline better; but every part reads each stage's weights again, which is
// what a decode token costs. So: one part per stage for a batch of decodes, and for prompt tokens
// up to 4 per stage, each of at least kMinPartTokens tokens (enough rows to keep a matmul
// compute-bound); never more parts than tokens (one token: the stages in turn).
constexpr int64_t kMinPartTokens = 64;

}  // namespace

int32_t parallel_runner::micro_batch_count(std::span<const step_sequence> batch) const {
  int64_t total = 0;
  for (const auto& sq : batch) total += static_cast<int64_t>(sq.tokens.size());
  const int64_t stages = pipeline_size();
  return static_cast<int32_t>(std::min(total, std::clamp(total / kMinPartTokens, stages, 4 * stages)));
}

parallel_runner::parallel_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size, dtype kv_type,
                                 model_runner_options opts, parallel_config parallel)
    : ckpt_(ckpt) {
  check_parallel(ckpt, parallel);  // before any thread or pool exists
  bounds_ = pipeline_layer_bounds(ckpt, parallel.pipeline_size, parallel.pipeline_layers);
  const int32_t stages = parallel.pipeline_size;
  wavefront_ = resolved_schedule(parallel) == pipeline_schedule::wavefront;
  // In turn, each stage (its ranks, if a group) has every thread, as one runner does.
  parallel_config group = parallel;
  group.threads = wavefront_ ? stage_threads(parallel) : parallel.threads;
  group.pipeline_size = 1;
  group.pipeline_layers.clear();
  for (int32_t s = 0; s < stages; ++s) {
    model_runner_options o = opts;
    o.first_layer = bounds_[static_cast<size_t>(s)];
    o.end_layer = bounds_[static_cast<size_t>(s) + 1];
    // In turn, no two stages step at once: the later stages' ranks use the first stage's scratch.
    const auto shared = wavefront_ || s == 0 ? std::vector<std::shared_ptr<model_runner_scratch>>{} : stages_.front()->scratch();
    stages_.push_back(std::make_unique<tensor_parallel_runner>(ckpt, num_blocks, block_size, kv_type, o, group, shared));
  }
  share_ = group.threads;
  all_threads_ = parallel.threads;  // 0: the calling thread's OpenMP count, whatever it is then
  // A stage with one rank runs its parallel regions on the stage's thread: its team size is the
  // stage's share (tensor_parallel_runner sets it around each step); a group's ranks set their own.
  if (wavefront_) threads_ = std::make_unique<tp_group>(stages, std::max(1, group.threads));
}

parallel_runner::~parallel_runner() = default;

int32_t parallel_runner::add_adapter(std::shared_ptr<const lora_adapter> adapter) {
  const int32_t slot = static_cast<int32_t>(num_adapters());
  set_adapter(slot, std::move(adapter));
  return slot;
}

void parallel_runner::set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) {
  // The first stage checks the adapter (and throws) before any other stage takes it.
  for (auto& s : stages_) s->set_adapter(slot, adapter);
}

size_t parallel_runner::kv_bytes() const noexcept {
  size_t b = 0;
  for (const auto& s : stages_) b += s->kv_bytes();
  return b;
}

void parallel_runner::step(std::span<const step_sequence> batch, step_result& out) {
  if (stages_.size() == 1) {
    stages_.front()->step(batch, out);
    return;
  }
  stages_.front()->validate(batch);  // every stage's checks, before any K/V is written
  const int32_t count = wavefront_ ? micro_batch_count(batch) : 1;
  if (count == 1) {
    run_in_turn(batch, out);
    return;
  }
  parts_ = split_micro_batches(batch, count);
  residual_.resize(parts_.size() * 2);
  results_.resize(parts_.size());
  passed_.assign(parts_.size(), 0);
  failed_ = false;
  threads_->run([this](int32_t s) { run_stage(s); });
  merge_micro_results(batch, parts_, results_, ckpt_.weights.lm_head.rows, ckpt_.config.hidden_size, out);
}

// Every stage on the caller's thread with all the threads (a stage of one rank takes the team size
// for its steps and gives its wavefront share back after).
void parallel_runner::run_in_turn(std::span<const step_sequence> batch, step_result& out) {
  const float* in = nullptr;
  for (int32_t s = 0; s < pipeline_size(); ++s) {
    const bool last = s + 1 == pipeline_size();
    aligned_vector<float>* res_out = last ? nullptr : &turn_[s % 2];
    auto& st = *stages_[static_cast<size_t>(s)];
    st.set_threads(all_threads_);
    try {
      st.step(batch, out, in, res_out);
    } catch (...) {
      st.set_threads(share_);
      throw;
    }
    st.set_threads(share_);
    in = last ? nullptr : turn_[s % 2].data();
  }
}

// Stage s takes the parts in order, each once stage s - 1 has passed it on; part j's residual rows
// alternate between its two buffers (stage s reads one, writes the other).
void parallel_runner::run_stage(int32_t s) {
  const bool last = s + 1 == pipeline_size();
  for (size_t j = 0; j < parts_.size(); ++j) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return failed_ || passed_[j] == s; });
      if (failed_) return;  // the stage that failed throws for the step
    }
    const float* in = s == 0 ? nullptr : residual_[j * 2 + static_cast<size_t>(s % 2)].data();
    aligned_vector<float>* res_out = last ? nullptr : &residual_[j * 2 + static_cast<size_t>((s + 1) % 2)];
    try {
      stages_[static_cast<size_t>(s)]->step(parts_[j].seqs, results_[j], in, res_out);
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = true;
      }
      cv_.notify_all();
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      passed_[j] = s + 1;
    }
    cv_.notify_all();
  }
}

}  // namespace troupe
