// priority: lower `priority` first, with aging so that a low-priority request cannot starve: its
// effective priority drops by one level per `aging_ms` of waiting. Ties go by arrival.
// Config: aging_ms (default 10000; 0 = strict priority, which can starve).
//
// Aging needs no re-sorting: comparing  p_a - (now - t_a)/A  with  p_b - (now - t_b)/A  is
// comparing  p_a*A + t_a  with  p_b*A + t_b,  so each request gets one key when it is queued
// and the waiting set stays a sorted tree (O(log n) per event, O(cap) per ranking).
#include <set>

#include "plugins/common/policy_kit.hpp"

namespace {

using namespace troupe_policy_kit;

class priority final : public policy {
 public:
  static constexpr const char* name = "priority";
  static constexpr const char* description = "lower priority value first, aged by waiting time";

  explicit priority(config& c)
      : aging_ns_(static_cast<int64_t>(c.number("aging_ms", 10000, 0, 1e9) * 1e6)) {}

  void on_waiting(const troupe_policy_request& r) override {
    reqs_.enter_waiting(r);
    waiting_.insert(key_of(r.priority, r.arrival_ns, r.arrival_seq, r.id));
  }
  void on_running(const troupe_policy_request& r) override {
    auto& q = reqs_.enter_running(r);
    waiting_.erase(key_of(q.priority, q.arrival_ns, q.arrival_seq, q.id));
  }
  void on_update(const troupe_policy_request& r) override {
    auto& q = reqs_.at(r.id);
    if (q.waiting && (q.priority != r.priority || q.arrival_ns != r.arrival_ns)) {
      waiting_.erase(key_of(q.priority, q.arrival_ns, q.arrival_seq, q.id));
      waiting_.insert(key_of(r.priority, r.arrival_ns, r.arrival_seq, r.id));
    }
    q.assign(r);
  }
  void on_finished(int64_t id) override {
    auto& q = reqs_.at(id);
    if (q.waiting) waiting_.erase(key_of(q.priority, q.arrival_ns, q.arrival_seq, q.id));
    reqs_.erase(id);
  }
  uint32_t rank(int64_t, int64_t* out, uint32_t cap) override {
    uint32_t n = 0;
    for (auto it = waiting_.begin(); it != waiting_.end() && n < cap; ++it) out[n++] = it->id;
    return n;
  }
  int64_t victim(int64_t, const int64_t* c, uint32_t n) override {
    // The least urgent by the same aged key: it would be admitted last if it were waiting.
    auto key = [&](int64_t id) {
      const auto& q = reqs_.at(id);
      return key_of(q.priority, q.arrival_ns, q.arrival_seq, id);
    };
    int64_t best = c[0];
    auto best_key = key(best);
    for (uint32_t i = 1; i < n; ++i) {
      auto k = key(c[i]);
      if (best_key < k) best = c[i], best_key = k;
    }
    return best;
  }

 private:
  struct key {
    __int128 urgency;  // smaller is served first; 128 bits: priority * aging_ns can pass 2^63
    int64_t arrival_seq;
    int64_t id;
    bool operator<(const key& o) const {
      return urgency != o.urgency ? urgency < o.urgency : arrival_seq < o.arrival_seq;
    }
  };
  key key_of(int32_t prio, int64_t arrival_ns, int64_t seq, int64_t id) const {
    __int128 u = aging_ns_ > 0 ? static_cast<__int128>(prio) * aging_ns_ + arrival_ns : static_cast<__int128>(prio);
    return {u, seq, id};
  }

  int64_t aging_ns_;
  registry reqs_;
  std::set<key> waiting_;
};

}  // namespace

TROUPE_POLICY_KIT_EXPORT(priority)
