// The server's handle on its scheduling policy: loads the configured one at start, swaps it on
// an admin request (on the scheduler's thread, between steps), and renders the policy metrics
// (from any thread). Keeps counters across swaps, so a fallback or a refused swap stays visible.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/plugin_host/plugin_policy.hpp"
#include "runtime/sched/scheduler.hpp"

namespace troupe::plugin_host {

struct policy_settings {
  std::string policy = "fcfs";           // a name or a path to a .so
  std::string config{};                  // the policy's key=value config
  std::vector<std::string> plugin_dirs{};  // searched before the built-in dirs
  int64_t starvation_limit = 20000;      // see host_options
};

class policy_control {
 public:
  // `log` receives one line per event worth an operator's attention (default: stderr).
  explicit policy_control(policy_settings settings, std::function<void(const std::string&)> log = {});

  // The policy to start with: the configured one, or the last one swapped in (so a restarted
  // scheduler keeps what the operator chose). Throws troupe::error naming the reason (the server
  // must not start). "fcfs" whose plugin cannot be found anywhere uses the built-in C++ fcfs,
  // and says so.
  std::unique_ptr<sched::policy> initial();

  struct swap_result {
    bool ok = false;
    std::string policy;    // now in charge (ok)
    std::string previous;  // replaced (ok)
    std::string error;     // why the swap was refused (!ok); the old policy stays
  };
  // Loads `name_or_path` with `config` and installs it in `s` between two steps.
  swap_result swap(sched::scheduler& s, const std::string& name_or_path, const std::string& config);

  // Prometheus text (format 0.0.4) for the policy metrics; `labels` is e.g. `model_name="x"`.
  void render(std::string& out, const std::string& labels) const;

  int64_t fallbacks() const noexcept { return counters_->fallbacks.load(); }
  int64_t load_failures() const noexcept { return counters_->load_failures.load(); }
  int64_t swaps() const noexcept { return swaps_.load(); }
  std::string active() const;  // the policy deciding now ("fcfs" after a fallback)

 private:
  // Shared with the fallback callbacks of the instances, which the scheduler may keep past us.
  struct state {
    std::mutex mu;
    std::string configured;  // the policy last installed
    std::string active;      // == configured unless it fell back
    std::shared_ptr<bool> current;  // the installed instance's flag (under mu)
  };
  host_options options(const std::shared_ptr<bool>& flag);
  void installed(const std::string& name, const std::shared_ptr<bool>& flag);

  policy_settings settings_;  // policy and config: the last installed
  std::function<void(const std::string&)> log_;
  std::string announced_;     // initial() logs each policy it loads once
  std::shared_ptr<policy_counters> counters_ = std::make_shared<policy_counters>();
  std::atomic<int64_t> swaps_{0};
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

}  // namespace troupe::plugin_host
