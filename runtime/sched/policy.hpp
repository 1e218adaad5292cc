// Scheduling policy: the one decision the scheduler delegates — which sequence is served first.
// The scheduler keeps the mechanics (budgets, blocks, chunking, preemption); a policy only orders.
// A later issue loads policies as dlopen plugins through a C ABI with this same shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace troupe::sched {

// What a policy may look at.
struct seq_view {
  int64_t seq_id = 0;
  int64_t arrival = 0;   // admission order (monotonic)
  int32_t priority = 0;  // lower is served first
  std::string_view tenant;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
};

class policy {
 public:
  virtual ~policy() = default;
  virtual std::string_view name() const noexcept = 0;
  // True when `a` is served before `b`: a strict weak order. The waiting queue is admitted in
  // this order and preemption takes running sequences from its far end.
  virtual bool before(const seq_view& a, const seq_view& b) const noexcept = 0;
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
