// cache-aware: prefers requests whose prompt prefix is already in the KV cache, longest cached
// prefix first (SGLang's longest-prefix-match order): they prefill least and use their cached
// blocks before eviction takes them. A starvation guard serves any request that has waited
// max_wait_ms first, oldest first. Preempts the latest arrival first, as fcfs does.
// Config: max_wait_ms (default 30000; 0 = no guard).
#include "plugins/common/guarded_queue.hpp"
#include "plugins/common/policy_kit.hpp"

namespace {

using namespace troupe_policy_kit;

class cache_aware final : public policy {
 public:
  static constexpr const char* name = "cache-aware";
  static constexpr const char* description = "longest cached prefix first, with a starvation guard";

  explicit cache_aware(config& c) : waiting_(static_cast<int64_t>(c.number("max_wait_ms", 30000, 0, 1e9) * 1e6)) {}

  void on_waiting(const troupe_policy_request& r) override {
    auto& q = reqs_.enter_waiting(r);
    waiting_.insert(q.id, -int64_t{q.cached_prefix_tokens}, q.arrival_ns, q.arrival_seq);
  }
  void on_running(const troupe_policy_request& r) override {
    reqs_.enter_running(r);
    waiting_.erase(r.id);
  }
  void on_update(const troupe_policy_request& r) override {
    auto& q = reqs_.at(r.id);
    bool rekey = q.waiting && q.cached_prefix_tokens != r.cached_prefix_tokens;
    q.assign(r);
    if (rekey) {
      waiting_.erase(q.id);
      waiting_.insert(q.id, -int64_t{q.cached_prefix_tokens}, q.arrival_ns, q.arrival_seq);
    }
  }
  void on_finished(int64_t id) override {
    reqs_.at(id);
    waiting_.erase(id);
    reqs_.erase(id);
  }
  uint32_t rank(int64_t now, int64_t* out, uint32_t cap) override { return waiting_.rank(now, out, cap); }
  int64_t victim(int64_t, const int64_t* c, uint32_t n) override {
    int64_t best = c[0];
    for (uint32_t i = 1; i < n; ++i)
      if (reqs_.at(c[i]).arrival_seq > reqs_.at(best).arrival_seq) best = c[i];
    return best;
  }

 private:
  registry reqs_;
  guarded_queue<int64_t> waiting_;  // key: -cached prefix tokens
};

}  // namespace

TROUPE_POLICY_KIT_EXPORT(cache_aware)
