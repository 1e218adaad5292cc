// Drives one policy plugin through its C ABI exactly as the host would, with synthetic requests
// and times, so each policy's answers can be compared with a hand-worked expectation.
#pragma once

#include <boost/test/unit_test.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/plugin_host/plugin_library.hpp"

namespace policy_test {

struct spec {
  int64_t id;
  int64_t arrival_ns = 0;
  int32_t priority = 0;
  std::string tenant{};
  int32_t prompt = 8;
  int32_t max_output = 8;
  int32_t cached = 0;
  int64_t deadline_ns = 0;
};

class driver {
 public:
  driver(const std::string& path, const std::string& config = "")
      : lib_(troupe::plugin_host::plugin_library::open(path)), api_(lib_->api()) {
    char err[512] = {};
    int32_t rc = api_.create(config.c_str(), &inst_, err, sizeof err);
    BOOST_REQUIRE_MESSAGE(rc == TROUPE_POLICY_OK, "create failed: " << err);
  }
  ~driver() { api_.destroy(inst_); }

  // Creating with `config` fails; returns the message.
  static std::string create_error(const std::string& path, const std::string& config) {
    auto lib = troupe::plugin_host::plugin_library::open(path);
    void* inst = nullptr;
    char err[512] = {};
    int32_t rc = lib->api().create(config.c_str(), &inst, err, sizeof err);
    if (rc == TROUPE_POLICY_OK) lib->api().destroy(inst);
    BOOST_REQUIRE_MESSAGE(rc != TROUPE_POLICY_OK, "config '" << config << "' was accepted");
    return err;
  }

  void arrive(const spec& s) {
    auto& r = reqs_[s.id];
    r.s = s;
    r.c.struct_size = sizeof(troupe_policy_request);
    r.c.id = s.id;
    r.c.arrival_seq = next_seq_++;
    r.c.arrival_ns = s.arrival_ns;
    r.c.deadline_ns = s.deadline_ns;
    r.c.priority = s.priority;
    r.c.prompt_tokens = s.prompt;
    r.c.max_output_tokens = s.max_output;
    r.c.cached_prefix_tokens = s.cached;
    ok(api_.on_waiting(inst_, req(s.id)), "on_waiting");
  }
  void run(int64_t id) {
    reqs_.at(id).c.computed_tokens = reqs_.at(id).c.prompt_tokens + reqs_.at(id).c.output_tokens;
    ok(api_.on_running(inst_, req(id)), "on_running");
  }
  void produce(int64_t id, int32_t tokens = 1) {
    auto& c = reqs_.at(id).c;
    c.output_tokens += tokens;
    c.computed_tokens = c.prompt_tokens + c.output_tokens - 1;
    ok(api_.on_update(inst_, req(id)), "on_update");
  }
  void set_cached(int64_t id, int32_t cached) {
    reqs_.at(id).c.cached_prefix_tokens = cached;
    ok(api_.on_update(inst_, req(id)), "on_update");
  }
  void preempt(int64_t id) {
    reqs_.at(id).c.computed_tokens = 0;
    ok(api_.on_waiting(inst_, req(id)), "on_waiting (preempted)");
  }
  void finish(int64_t id) {
    ok(api_.on_finished(inst_, id), "on_finished");
    reqs_.erase(id);
  }
  std::vector<int64_t> rank(int64_t now_ns, uint32_t cap) {
    std::vector<int64_t> out(cap, -1);
    uint32_t n = 0;
    ok(api_.rank_waiting(inst_, now_ns, out.data(), cap, &n), "rank_waiting");
    BOOST_REQUIRE_LE(n, cap);
    out.resize(n);
    return out;
  }
  int64_t victim(int64_t now_ns, std::vector<int64_t> candidates) {
    int64_t v = -1;
    ok(api_.pick_victim(inst_, now_ns, candidates.data(), static_cast<uint32_t>(candidates.size()), &v),
       "pick_victim");
    return v;
  }
  // A call expected to fail: its return code and last_error.
  std::string on_running_error(int64_t id) {
    troupe_policy_request r{};
    r.struct_size = sizeof r;
    r.id = id;
    r.tenant = "";
    BOOST_REQUIRE_NE(api_.on_running(inst_, &r), TROUPE_POLICY_OK);
    const char* m = api_.last_error ? api_.last_error(inst_) : nullptr;
    return m ? m : "";
  }
  const troupe_policy_api& api() const { return api_; }

 private:
  struct held {
    spec s;
    troupe_policy_request c{};
  };
  const troupe_policy_request* req(int64_t id) {
    auto& r = reqs_.at(id);
    r.c.tenant = r.s.tenant.c_str();
    r.c.tenant_len = static_cast<uint32_t>(r.s.tenant.size());
    return &r.c;
  }
  void ok(int32_t rc, const char* what) {
    const char* m = api_.last_error ? api_.last_error(inst_) : nullptr;
    BOOST_REQUIRE_MESSAGE(rc == TROUPE_POLICY_OK, what << " failed: " << (m ? m : "(no message)"));
  }

  std::shared_ptr<const troupe::plugin_host::plugin_library> lib_;
  const troupe_policy_api& api_;
  void* inst_ = nullptr;
  std::map<int64_t, held> reqs_;
  int64_t next_seq_ = 0;
};

using ids = std::vector<int64_t>;
constexpr int64_t ms = 1'000'000;

}  // namespace policy_test
