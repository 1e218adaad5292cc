// fair-share: tenants share the server in proportion to their weights, counted in tokens served
// (a virtual token counter, after Sheng et al., "Fairness in Serving Large Language Models",
// OSDI 2024). Each tenant's counter grows by cost / weight as its requests are served; the
// tenant with the smallest counter is admitted next, its requests in arrival order. A tenant
// that comes back after being idle starts at the smallest counter among active tenants, so idle
// time is not banked as credit. Preempts from the tenant furthest above its share.
// Config: weight.<tenant>=w (> 0; tenant "" is weight.=... not expressible: use default_weight),
// default_weight (1), output_token_cost (1), prompt_token_cost (0, charged once at admission for
// the prompt tokens not already cached).
#include <algorithm>
#include <limits>
#include <queue>

#include "plugins/common/policy_kit.hpp"

namespace {

using namespace troupe_policy_kit;

class fair_share final : public policy {
 public:
  static constexpr const char* name = "fair-share";
  static constexpr const char* description = "weighted fair share of tokens across tenants";

  explicit fair_share(config& c)
      : default_weight_(c.number("default_weight", 1, 1e-6, 1e6)),
        output_cost_(c.number("output_token_cost", 1, 0, 1e6)),
        prompt_cost_(c.number("prompt_token_cost", 0, 0, 1e6)) {
    for (auto& [tenant, w] : c.prefixed("weight.", 1e-6, 1e6)) weights_[tenant] = w;
  }

  void on_waiting(const troupe_policy_request& r) override {
    bool fresh = reqs_.find(r.id) == nullptr;
    auto& q = reqs_.enter_waiting(r);
    auto& t = tenant_of(q.tenant);
    if (fresh) {
      if (t.active == 0) t.service = std::max(t.service, min_active_service());
      ++t.active;
    }
    t.waiting.emplace(q.arrival_seq, q.id);
  }
  void on_running(const troupe_policy_request& r) override {
    bool first = !reqs_.at(r.id).ever_ran;
    auto& q = reqs_.enter_running(r);
    auto& t = tenant_of(q.tenant);
    t.waiting.erase(q.arrival_seq);
    if (first) t.service += prompt_cost_ * std::max(0, q.prompt_tokens - q.cached_prefix_tokens) / t.weight;
  }
  void on_update(const troupe_policy_request& r) override {
    auto& q = reqs_.at(r.id);
    auto& t = tenant_of(q.tenant);
    if (r.output_tokens > q.output_tokens) t.service += output_cost_ * (r.output_tokens - q.output_tokens) / t.weight;
    q.assign(r);
  }
  void on_finished(int64_t id) override {
    auto& q = reqs_.at(id);
    auto& t = tenant_of(q.tenant);
    if (q.waiting) t.waiting.erase(q.arrival_seq);
    --t.active;
    reqs_.erase(id);
  }

  uint32_t rank(int64_t, int64_t* out, uint32_t cap) override {
    // Project the counters forward: each pick charges the tenant the request's expected cost,
    // so one ranking interleaves tenants in proportion to their weights.
    struct head {
      double service;
      int64_t arrival_seq;
      tenant_state* t;
      std::map<int64_t, int64_t>::const_iterator it;
      bool operator>(const head& o) const {
        return service != o.service ? service > o.service : arrival_seq > o.arrival_seq;
      }
    };
    std::priority_queue<head, std::vector<head>, std::greater<head>> heap;
    for (auto& [name, t] : tenants_)
      if (!t.waiting.empty()) heap.push({t.service, t.waiting.begin()->first, &t, t.waiting.begin()});
    uint32_t n = 0;
    while (n < cap && !heap.empty()) {
      head h = heap.top();
      heap.pop();
      const auto& q = reqs_.at(h.it->second);
      out[n++] = q.id;
      h.service += expected_cost(q) / h.t->weight;
      if (++h.it != h.t->waiting.end()) {
        h.arrival_seq = h.it->first;
        heap.push(h);
      }
    }
    return n;
  }

  int64_t victim(int64_t, const int64_t* c, uint32_t n) override {
    // The tenant furthest above its share gives back first; within it, the latest arrival.
    int64_t best = c[0];
    for (uint32_t i = 1; i < n; ++i) {
      const auto &a = reqs_.at(c[i]), &b = reqs_.at(best);
      double sa = tenant_of(a.tenant).service, sb = tenant_of(b.tenant).service;
      if (sa > sb || (sa == sb && a.arrival_seq > b.arrival_seq)) best = c[i];
    }
    return best;
  }

 private:
  struct tenant_state {
    double weight = 1;
    double service = 0;                  // tokens charged / weight
    int64_t active = 0;                  // waiting + running requests
    std::map<int64_t, int64_t> waiting;  // arrival_seq -> id
  };

  tenant_state& tenant_of(const std::string& name) {
    auto it = tenants_.find(name);
    if (it != tenants_.end()) return it->second;
    auto w = weights_.find(name);
    tenant_state t;
    t.weight = w == weights_.end() ? default_weight_ : w->second;
    return tenants_.emplace(name, std::move(t)).first->second;
  }
  double min_active_service() const {
    double m = 0;
    bool any = false;
    for (const auto& [name, t] : tenants_)
      if (t.active > 0) m = any ? std::min(m, t.service) : t.service, any = true;
    return m;
  }
  double expected_cost(const request& q) const {
    return output_cost_ * std::max(1, q.max_output_tokens - q.output_tokens) +
           (q.ever_ran ? 0.0 : prompt_cost_ * std::max(0, q.prompt_tokens - q.cached_prefix_tokens));
  }

  double default_weight_, output_cost_, prompt_cost_;
  std::map<std::string, double> weights_;
  std::unordered_map<std::string, tenant_state> tenants_;
  registry reqs_;
};

}  // namespace

TROUPE_POLICY_KIT_EXPORT(fair_share)
