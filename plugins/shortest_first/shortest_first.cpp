// shortest-first: the request with the least expected work left goes first (shortest remaining
// processing time minimises mean latency), with a starvation guard: a request that has waited
// max_wait_ms is served before any newer one, oldest first.
// Work = prefill_token_cost * (prompt + output - max(cached prefix, computed))
//      + decode_token_cost * (max_output - output).
// Config: max_wait_ms (default 30000; 0 = no guard), prefill_token_cost (1), decode_token_cost (1).
#include <algorithm>

#include "plugins/common/guarded_queue.hpp"
#include "plugins/common/policy_kit.hpp"

namespace {

using namespace troupe_policy_kit;

class shortest_first final : public policy {
 public:
  static constexpr const char* name = "shortest-first";
  static constexpr const char* description = "least expected work first, with a starvation guard";

  explicit shortest_first(config& c)
      : waiting_(static_cast<int64_t>(c.number("max_wait_ms", 30000, 0, 1e9) * 1e6)),
        prefill_cost_(c.number("prefill_token_cost", 1, 0, 1e6)),
        decode_cost_(c.number("decode_token_cost", 1, 0, 1e6)) {}

  void on_waiting(const troupe_policy_request& r) override {
    auto& q = reqs_.enter_waiting(r);
    waiting_.insert(q.id, work(q), q.arrival_ns, q.arrival_seq);
  }
  void on_running(const troupe_policy_request& r) override {
    reqs_.enter_running(r);
    waiting_.erase(r.id);
  }
  void on_update(const troupe_policy_request& r) override {
    auto& q = reqs_.at(r.id);
    q.assign(r);
    if (q.waiting) {  // e.g. its cached prefix grew: re-key
      waiting_.erase(q.id);
      waiting_.insert(q.id, work(q), q.arrival_ns, q.arrival_seq);
    }
  }
  void on_finished(int64_t id) override {
    reqs_.at(id);
    waiting_.erase(id);
    reqs_.erase(id);
  }
  uint32_t rank(int64_t now, int64_t* out, uint32_t cap) override { return waiting_.rank(now, out, cap); }
  int64_t victim(int64_t, const int64_t* c, uint32_t n) override {
    // The most work left (ties: the latest arrival): it would be admitted last.
    int64_t best = c[0];
    for (uint32_t i = 1; i < n; ++i) {
      const auto &a = reqs_.at(c[i]), &b = reqs_.at(best);
      double wa = work(a), wb = work(b);
      if (wa > wb || (wa == wb && a.arrival_seq > b.arrival_seq)) best = c[i];
    }
    return best;
  }

 private:
  double work(const request& q) const {
    int64_t prefill = int64_t{q.prompt_tokens} + q.output_tokens - std::max(q.cached_prefix_tokens, q.computed_tokens);
    int64_t decode = int64_t{q.max_output_tokens} - q.output_tokens;
    return prefill_cost_ * static_cast<double>(std::max<int64_t>(prefill, 0)) +
           decode_cost_ * static_cast<double>(std::max<int64_t>(decode, 0));
  }

  registry reqs_;
  guarded_queue<double> waiting_;
  double prefill_cost_, decode_cost_;
};

}  // namespace

TROUPE_POLICY_KIT_EXPORT(shortest_first)
