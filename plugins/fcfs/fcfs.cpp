// fcfs: first come, first served (the default policy, vLLM's too). Admits in arrival order and
// preempts the latest arrival first, so a request is never overtaken by one that came after it.
#include <algorithm>

#include "plugins/common/policy_kit.hpp"

namespace {

using namespace troupe_policy_kit;

class fcfs final : public policy {
 public:
  static constexpr const char* name = "fcfs";
  static constexpr const char* description = "first come, first served: arrival order";

  explicit fcfs(config&) {}

  void on_waiting(const troupe_policy_request& r) override {
    reqs_.enter_waiting(r);
    waiting_.emplace(r.arrival_seq, r.id);
  }
  void on_running(const troupe_policy_request& r) override {
    auto& q = reqs_.enter_running(r);
    waiting_.erase(q.arrival_seq);
  }
  void on_update(const troupe_policy_request& r) override { reqs_.at(r.id).assign(r); }
  void on_finished(int64_t id) override {
    auto& q = reqs_.at(id);
    if (q.waiting) waiting_.erase(q.arrival_seq);
    reqs_.erase(id);
  }
  uint32_t rank(int64_t, int64_t* out, uint32_t cap) override {
    uint32_t n = 0;
    for (auto it = waiting_.begin(); it != waiting_.end() && n < cap; ++it) out[n++] = it->second;
    return n;
  }
  int64_t victim(int64_t, const int64_t* c, uint32_t n) override {
    // The latest arrival: it has waited least and, under FCFS, would be served last anyway.
    int64_t best = c[0];
    for (uint32_t i = 1; i < n; ++i)
      if (reqs_.at(c[i]).arrival_seq > reqs_.at(best).arrival_seq) best = c[i];
    return best;
  }

 private:
  registry reqs_;
  std::map<int64_t, int64_t> waiting_;  // arrival_seq -> id
};

}  // namespace

TROUPE_POLICY_KIT_EXPORT(fcfs)
