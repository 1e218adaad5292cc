#include "runtime/plugin_host/policy_control.hpp"

#include <cstdio>

#include "runtime/core/error.hpp"
#include "runtime/core/prometheus.hpp"

namespace troupe::plugin_host {

policy_control::policy_control(policy_settings settings, std::function<void(const std::string&)> log)
    : settings_(std::move(settings)), log_(std::move(log)) {
  if (!log_) log_ = [](const std::string& m) { std::fprintf(stderr, "troupe: %s\n", m.c_str()); };
}

host_options policy_control::options(const std::shared_ptr<bool>& flag) {
  host_options o;
  o.search_dirs = settings_.plugin_dirs;
  o.starvation_limit = settings_.starvation_limit;
  o.log = log_;
  o.counters = counters_;
  // Only the installed instance may relabel the active policy: one swapped out since (or one
  // whose swap was refused) falls back unseen.
  o.on_fallback = [st = state_, flag](const std::string&) {
    std::lock_guard lock(st->mu);
    if (*flag) st->active = "fcfs";
  };
  return o;
}

void policy_control::installed(const std::string& name, const std::shared_ptr<bool>& flag) {
  std::lock_guard lock(state_->mu);
  if (state_->current) *state_->current = false;
  *flag = true;
  state_->current = flag;
  state_->configured = name;
  state_->active = name;
}

std::string policy_control::active() const {
  std::lock_guard lock(state_->mu);
  return state_->active;
}

std::unique_ptr<sched::policy> policy_control::initial() {
  std::string path;
  try {
    path = resolve_plugin(settings_.policy, settings_.plugin_dirs);
  } catch (const error& e) {
    if (settings_.policy != "fcfs") {
      counters_->load_failures.fetch_add(1);
      throw;
    }
    if (announced_ != "fcfs (built-in)")
      log_(std::string("the fcfs plugin was not found (") + e.what() + "); using the built-in fcfs");
    announced_ = "fcfs (built-in)";
    installed("fcfs", std::make_shared<bool>(false));
    return std::make_unique<sched::fcfs_policy>();
  }
  auto flag = std::make_shared<bool>(false);
  auto p = load_policy(path, settings_.config, options(flag));
  installed(std::string(p->plugin_name()), flag);
  std::string line = "scheduling policy '" + std::string(p->plugin_name()) + "' from " + p->path() +
                     (settings_.config.empty() ? std::string() : " with config \"" + settings_.config + "\"");
  if (line != announced_) log_(line);
  announced_ = line;
  return p;
}

policy_control::swap_result policy_control::swap(sched::scheduler& s, const std::string& name_or_path,
                                                 const std::string& config) {
  swap_result r;
  r.previous = std::string(s.current_policy().name());
  try {
    auto flag = std::make_shared<bool>(false);
    auto p = load_policy(name_or_path, config, options(flag));
    r.policy = std::string(p->plugin_name());
    std::string path = p->path();
    s.set_policy(std::move(p));
    installed(r.policy, flag);
    settings_.policy = path;
    settings_.config = config;
    swaps_.fetch_add(1);
    r.ok = true;
    log_("scheduling policy swapped: '" + r.previous + "' -> '" + r.policy + "' from " + path +
         (config.empty() ? std::string() : " with config \"" + config + "\"") + "; no request dropped");
  } catch (const error& e) {
    r.error = e.what();
    log_("scheduling policy swap to '" + name_or_path + "' refused, '" + r.previous + "' stays: " + r.error);
  }
  return r;
}

void policy_control::render(std::string& out, const std::string& labels) const {
  std::string configured, active;
  {
    std::lock_guard lock(state_->mu);
    configured = state_->configured;
    active = state_->active;
  }
  auto line = [&](const char* name, const char* type, const char* help, const std::string& extra, int64_t v) {
    prometheus::family(out, name, type, help);
    prometheus::sample(out, name, labels, extra, static_cast<double>(v));
  };
  line("policy_info", "gauge", "The scheduling policy deciding now (active) and the one configured.",
       "policy=\"" + prometheus::escape_label(active) + "\",configured=\"" + prometheus::escape_label(configured) + "\"", 1);
  line("policy_fallbacks_total", "counter",
       "Policy plugins that misbehaved and were replaced by fcfs (see the server log for why).", "",
       counters_->fallbacks.load());
  line("policy_load_failures_total", "counter", "Policy loads or swaps refused.", "", counters_->load_failures.load());
  line("policy_swaps_total", "counter", "Policies swapped in on a running server.", "", swaps_.load());
}

}  // namespace troupe::plugin_host
