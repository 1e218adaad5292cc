// The scheduler's policy interface over one plugin instance, and the containment around it.
// Invariant: the scheduler only ever sees valid answers. Any misbehaviour (an error code, a C++
// exception escaping the ABI, an invented or duplicate id, a short ranking, a victim outside the
// candidates, a request overtaken too often) makes this adapter log why, count it, stop calling
// the plugin and answer as first come, first served from then on; no request is dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/plugin_host/plugin_library.hpp"
#include "runtime/sched/policy.hpp"

namespace troupe::plugin_host {

// Shared with the server's metrics; every field may be read from any thread.
struct policy_counters {
  std::atomic<int64_t> fallbacks{0};      // plugins judged misbehaving and replaced by fcfs
  std::atomic<int64_t> load_failures{0};  // loads (at start or for a swap) refused
};

struct host_options {
  std::vector<std::string> search_dirs;  // looked in before $TROUPE_PLUGIN_PATH and the built-in dirs
  // How often the request waiting longest may be overtaken by later ones before the policy is
  // judged to never admit it (fcfs: never; priority with aging: until it has aged). 0 = no limit.
  int64_t starvation_limit = 20000;
  std::function<int64_t()> now_ns;                 // default: steady_clock nanoseconds
  std::function<void(const std::string&)> log;     // default: one line on stderr
  std::function<void(const std::string&)> on_fallback;  // told the reason once, after the log line
  std::shared_ptr<policy_counters> counters;       // default: a private set
};

class plugin_policy final : public sched::policy {
 public:
  // Creates an instance with `config` (the plugin's key=value string). Throws
  // troupe::error(invalid_argument) with the plugin's own message when create fails.
  plugin_policy(std::shared_ptr<const plugin_library> lib, std::string_view config, host_options opts);
  ~plugin_policy() override;

  // The plugin's name while it behaves, "fcfs" once it has been replaced.
  std::string_view name() const noexcept override;
  // Arrival order: the scheduler's queues stay in FCFS order and the plugin reorders admission.
  bool before(const sched::seq_view& a, const sched::seq_view& b) const noexcept override {
    return a.arrival < b.arrival;
  }
  void on_waiting(const sched::seq_view& v) override;
  void on_running(const sched::seq_view& v) override;
  void on_update(const sched::seq_view& v) override;
  void on_finished(int64_t seq_id) override;
  void admit_order(std::span<const int64_t> waiting, size_t max, std::vector<int64_t>& out) override;
  int64_t preempt_victim(std::span<const int64_t> candidates) override;

  std::string_view plugin_name() const noexcept { return lib_->name(); }
  const std::string& path() const noexcept { return lib_->path(); }
  bool fell_back() const noexcept { return !healthy_; }
  const std::string& fallback_reason() const noexcept { return fallback_reason_; }
  const policy_counters& counters() const noexcept { return *opts_.counters; }

 private:
  struct record {
    troupe_policy_request req{};
    std::string tenant;
    bool waiting = false;
    uint64_t ranked_epoch = 0;   // == epoch_: already in the ranking being checked
    uint64_t offered_epoch = 0;  // == epoch_: offered for admission in this step
  };

  record& fill(const sched::seq_view& v);
  const troupe_policy_request* c_request(record& r);
  // Logs, counts and switches to fcfs; `what` says what the plugin did.
  void misbehaved(const std::string& what);
  // Runs one plugin call; false (after misbehaved) on an error code or an exception.
  template <class Fn>
  bool call(const char* fn_name, Fn&& fn);
  void watch_starvation(int64_t admitted_id);

  std::shared_ptr<const plugin_library> lib_;
  const troupe_policy_api& api_;
  host_options opts_;
  void* instance_ = nullptr;
  bool healthy_ = true;
  std::string fallback_reason_;

  std::unordered_map<int64_t, record> recs_;
  std::map<int64_t, int64_t> waiting_by_arrival_;  // arrival -> id: the oldest waiting is first
  uint64_t epoch_ = 0;
  std::vector<int64_t> buf_;
  int64_t watched_id_ = -1;  // the oldest waiting request, and how often it has been overtaken
  int64_t overtakes_ = 0;
};

// resolve_plugin + plugin_library::open + plugin_policy: the one call the server makes at start
// and for a swap. Counts a failure in opts.counters->load_failures and rethrows it.
std::unique_ptr<plugin_policy> load_policy(std::string_view name_or_path, std::string_view config,
                                           host_options opts = {});

}  // namespace troupe::plugin_host
