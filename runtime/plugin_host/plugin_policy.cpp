#include "runtime/plugin_host/plugin_policy.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/core/error.hpp"

namespace troupe::plugin_host {

namespace {

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

plugin_policy::plugin_policy(std::shared_ptr<const plugin_library> lib, std::string_view config, host_options opts)
    : lib_(std::move(lib)), api_(lib_->api()), opts_(std::move(opts)) {
  if (!opts_.now_ns) opts_.now_ns = steady_now_ns;
  if (!opts_.log) opts_.log = [](const std::string& m) { std::fprintf(stderr, "troupe: %s\n", m.c_str()); };
  if (!opts_.counters) opts_.counters = std::make_shared<policy_counters>();
  std::string cfg(config);
  char err[512] = {};
  int32_t rc = TROUPE_POLICY_ERROR;
  try {
    rc = api_.create(cfg.c_str(), &instance_, err, sizeof err);
  } catch (...) {
    throw_error(errc::invalid_argument, "scheduling policy '" + std::string(lib_->name()) +
                                            "': create threw a C++ exception across the C ABI");
  }
  err[sizeof err - 1] = '\0';
  if (rc != TROUPE_POLICY_OK || !instance_)
    throw_error(errc::invalid_argument, "scheduling policy '" + std::string(lib_->name()) + "' (" + lib_->path() +
                                            ") refused its config \"" + cfg + "\": " +
                                            (err[0] ? std::string(err) : std::string("no message")));
}

plugin_policy::~plugin_policy() {
  try {
    api_.destroy(instance_);
  } catch (...) {
    // Nothing to do: the library is unloaded right after.
  }
}

std::string_view plugin_policy::name() const noexcept { return healthy_ ? lib_->name() : std::string_view("fcfs"); }

void plugin_policy::misbehaved(const std::string& what) {
  if (!healthy_) return;
  healthy_ = false;
  fallback_reason_ = what;
  opts_.counters->fallbacks.fetch_add(1, std::memory_order_relaxed);
  opts_.log("scheduling policy '" + std::string(lib_->name()) + "' (" + lib_->path() + ") misbehaved: " + what +
            "; falling back to fcfs (no request is dropped)");
  if (opts_.on_fallback) opts_.on_fallback(what);
}

template <class Fn>
bool plugin_policy::call(const char* fn_name, Fn&& fn) {
  if (!healthy_) return false;  // never call a plugin again once it misbehaved
  int32_t rc = TROUPE_POLICY_ERROR;
  try {
    rc = fn();
  } catch (const std::exception& e) {
    misbehaved(std::string(fn_name) + " threw a C++ exception across the C ABI: " + e.what());
    return false;
  } catch (...) {
    misbehaved(std::string(fn_name) + " threw a C++ exception across the C ABI");
    return false;
  }
  if (rc == TROUPE_POLICY_OK) return true;
  const char* msg = nullptr;
  if (api_.last_error) {
    try {
      msg = api_.last_error(instance_);
    } catch (...) {
      msg = nullptr;
    }
  }
  misbehaved(std::string(fn_name) + " returned error " + std::to_string(rc) + (msg ? std::string(": ") + msg : ""));
  return false;
}

plugin_policy::record& plugin_policy::fill(const sched::seq_view& v) {
  auto& r = recs_[v.seq_id];
  r.req.struct_size = sizeof(troupe_policy_request);
  r.req.id = v.seq_id;
  r.req.arrival_seq = v.arrival;
  r.req.arrival_ns = v.arrival_ns;
  r.req.deadline_ns = v.deadline_ns;
  if (r.tenant != v.tenant) r.tenant.assign(v.tenant);
  r.req.priority = v.priority;
  r.req.prompt_tokens = v.num_prompt_tokens;
  r.req.output_tokens = v.num_output_tokens;
  r.req.max_output_tokens = v.max_output_tokens;
  r.req.cached_prefix_tokens = v.num_cached_tokens;
  r.req.computed_tokens = v.num_computed_tokens;
  return r;
}

const troupe_policy_request* plugin_policy::c_request(record& r) {
  // Set at each call: the string's buffer moves when the map rehashes.
  r.req.tenant = r.tenant.c_str();
  r.req.tenant_len = static_cast<uint32_t>(r.tenant.size());
  return &r.req;
}

void plugin_policy::on_waiting(const sched::seq_view& v) {
  if (!healthy_) return;
  auto& r = fill(v);
  TROUPE_ASSERT(!r.waiting);
  r.waiting = true;
  waiting_by_arrival_.emplace(v.arrival, v.seq_id);
  call("on_waiting", [&] { return api_.on_waiting(instance_, c_request(r)); });
}

void plugin_policy::on_running(const sched::seq_view& v) {
  if (!healthy_) return;
  auto& r = fill(v);
  TROUPE_ASSERT(r.waiting);
  watch_starvation(v.seq_id);
  r.waiting = false;
  waiting_by_arrival_.erase(v.arrival);
  call("on_running", [&] { return api_.on_running(instance_, c_request(r)); });
}

void plugin_policy::on_update(const sched::seq_view& v) {
  if (!healthy_) return;
  auto& r = fill(v);
  call("on_update", [&] { return api_.on_update(instance_, c_request(r)); });
}

void plugin_policy::on_finished(int64_t seq_id) {
  if (!healthy_) return;
  auto it = recs_.find(seq_id);
  TROUPE_ASSERT(it != recs_.end());
  if (it->second.waiting) waiting_by_arrival_.erase(it->second.req.arrival_seq);
  recs_.erase(it);
  call("on_finished", [&] { return api_.on_finished(instance_, seq_id); });
}

void plugin_policy::watch_starvation(int64_t admitted_id) {
  if (opts_.starvation_limit <= 0 || waiting_by_arrival_.empty()) return;
  int64_t oldest = waiting_by_arrival_.begin()->second;
  if (oldest == admitted_id) return;
  // Only the oldest is watched: any request the policy never admits becomes the oldest in time,
  // and every later admission overtakes it.
  if (oldest != watched_id_) watched_id_ = oldest, overtakes_ = 0;
  if (++overtakes_ > opts_.starvation_limit)
    misbehaved("request " + std::to_string(oldest) + ", the one waiting longest, was overtaken by " +
               std::to_string(overtakes_) + " later requests (starvation_limit " +
               std::to_string(opts_.starvation_limit) + "): the policy does not admit it");
}

void plugin_policy::admit_order(std::span<const int64_t> offered, size_t max, std::vector<int64_t>& out) {
  size_t want = std::min(max, offered.size());
  if (healthy_ && want > 0) {
    // The scheduler may offer a subset of the waiting requests (those still waiting for a
    // shared prefix-cache look-up are held back). The plugin ranks everything it knows; asking
    // for `held_back` more than needed leaves at least `want` offered ones after filtering.
    size_t num_waiting = waiting_by_arrival_.size();
    TROUPE_ASSERT(offered.size() <= num_waiting);
    size_t held_back = num_waiting - offered.size();
    size_t ask = std::min(want + held_back, num_waiting);
    ++epoch_;
    if (held_back > 0)
      for (int64_t id : offered) {
        auto it = recs_.find(id);
        TROUPE_ASSERT(it != recs_.end() && it->second.waiting);
        it->second.offered_epoch = epoch_;
      }
    buf_.assign(ask, -1);
    uint32_t n = 0;
    int64_t now = opts_.now_ns();
    if (call("rank_waiting",
             [&] { return api_.rank_waiting(instance_, now, buf_.data(), static_cast<uint32_t>(ask), &n); })) {
      std::string bad;
      if (n != ask) {
        bad = "rank_waiting ranked " + std::to_string(n) + " requests; expected min(capacity " + std::to_string(ask) +
              ", waiting " + std::to_string(num_waiting) + ") = " + std::to_string(ask);
      } else {
        for (int64_t id : buf_) {
          auto it = recs_.find(id);
          if (it == recs_.end()) {
            bad = "rank_waiting returned id " + std::to_string(id) + ", which is no request it was told about";
          } else if (!it->second.waiting) {
            bad = "rank_waiting returned id " + std::to_string(id) + ", which is running, not waiting";
          } else if (it->second.ranked_epoch == epoch_) {
            bad = "rank_waiting returned id " + std::to_string(id) + " twice";
          } else {
            it->second.ranked_epoch = epoch_;
            continue;
          }
          break;
        }
      }
      if (bad.empty()) {
        size_t added = 0;
        for (int64_t id : buf_) {
          if (added == want) break;
          if (held_back > 0 && recs_.at(id).offered_epoch != epoch_) continue;
          out.push_back(id);
          ++added;
        }
        TROUPE_ASSERT(added == want);
        return;
      }
      misbehaved(bad);
    }
  }
  out.insert(out.end(), offered.begin(), offered.begin() + static_cast<ptrdiff_t>(want));
}

int64_t plugin_policy::preempt_victim(std::span<const int64_t> candidates) {
  TROUPE_ASSERT(!candidates.empty());
  if (healthy_) {
    int64_t victim = -1;
    int64_t now = opts_.now_ns();
    if (call("pick_victim", [&] {
          return api_.pick_victim(instance_, now, candidates.data(), static_cast<uint32_t>(candidates.size()), &victim);
        })) {
      if (std::find(candidates.begin(), candidates.end(), victim) != candidates.end()) return victim;
      misbehaved("pick_victim chose id " + std::to_string(victim) + ", which is not one of the " +
                 std::to_string(candidates.size()) + " candidates");
    }
  }
  return candidates.back();
}

std::unique_ptr<plugin_policy> load_policy(std::string_view name_or_path, std::string_view config, host_options opts) {
  if (!opts.counters) opts.counters = std::make_shared<policy_counters>();
  auto counters = opts.counters;
  try {
    auto lib = plugin_library::open(resolve_plugin(name_or_path, opts.search_dirs));
    return std::make_unique<plugin_policy>(std::move(lib), config, std::move(opts));
  } catch (const error&) {
    counters->load_failures.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

}  // namespace troupe::plugin_host
