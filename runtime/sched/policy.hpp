// Scheduling policy: the one decision the scheduler delegates — which sequence is served first.
// The scheduler keeps the mechanics (budgets, blocks, chunking, preemption); a policy only orders.
// A later issue loads policies as dlopen plugins through a C ABI with this same shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::sched {

// What a policy may look at.
struct seq_view {
  int64_t seq_id = 0;
  int64_t arrival = 0;   // admission order (monotonic)
  int32_t priority = 0;  // lower is served first
  std::string_view tenant;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  // For stateful policies (plugins, runtime/plugin_host): times are steady_clock nanoseconds.
  int64_t arrival_ns = 0;            // when add() queued it (kept across preemption)
  int64_t deadline_ns = 0;           // 0: none
  int32_t max_output_tokens = 0;     // the most it may generate (max_tokens, capped by max_model_len)
  int32_t num_cached_tokens = 0;     // prompt prefix already in the KV cache (0 with prefix caching off)
  int32_t num_computed_tokens = 0;   // tokens whose K/V are in the pool (0 while waiting)
};

class policy {
 public:
  virtual ~policy() = default;
  virtual std::string_view name() const noexcept = 0;
  // True when `a` is served before `b`: a strict weak order. The waiting queue is admitted in
  // this order and preemption takes running sequences from its far end.
  virtual bool before(const seq_view& a, const seq_view& b) const noexcept = 0;

  // Stateful policies (plugins loaded by runtime/plugin_host) follow each sequence through these
  // notices and make the two decisions below themselves; the defaults keep the comparator
  // behaviour, so a comparator-only policy overrides none of them.
  virtual void on_waiting(const seq_view&) {}   // queued: arrived, preempted, or replayed by set_policy
  virtual void on_running(const seq_view&) {}   // admitted
  virtual void on_update(const seq_view&) {}    // computed or generated tokens in a step
  virtual void on_finished(int64_t /*seq_id*/) {}  // left the scheduler, from either queue
  // Appends to `out` up to `max` ids of `waiting` (queue order), in the order to admit them this
  // step; admission stops at the first that does not fit. Default: the queue order. `waiting` is
  // the sequences that may be admitted now: all waiting ones, or fewer when the scheduler holds
  // some back (a prefix-cache look-up still in flight); `on_waiting` was called for every one.
  virtual void admit_order(std::span<const int64_t> waiting, size_t max, std::vector<int64_t>& out);
  // The sequence to preempt first among `candidates` (running and not yet planned this step, in
  // queue order; never empty). Default: the last, the far end of the policy order.
  virtual int64_t preempt_victim(std::span<const int64_t> candidates) { return candidates.back(); }
};

// First come, first served (vLLM's default): arrival order only.
class fcfs_policy final : public policy {
 public:
  std::string_view name() const noexcept override { return "fcfs"; }
  bool before(const seq_view& a, const seq_view& b) const noexcept override {
    return a.arrival < b.arrival;
  }
};

// Lower `priority` first, then arrival (vLLM's "priority" policy).
class priority_policy final : public policy {
 public:
  std::string_view name() const noexcept override { return "priority"; }
  bool before(const seq_view& a, const seq_view& b) const noexcept override {
    return a.priority != b.priority ? a.priority < b.priority : a.arrival < b.arrival;
  }
};

// "fcfs" or "priority"; throws troupe::error(invalid_argument) naming the known ones otherwise.
std::unique_ptr<policy> make_policy(std::string_view name);

}  // namespace troupe::sched
