// The C++ side every built-in policy shares: a base class that the C entry points call, each call
// wrapped in TROUPE_POLICY_GUARD so no exception crosses the ABI, a strict key=value config reader,
// and a registry of the requests a policy was told about. Compiled into each plugin (header only):
// the C header stays the whole contract between a plugin and the server.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "plugins/troupe_sched_policy.h"

namespace troupe_policy_kit {

// Config items as key -> value. Every key must be read (number(), prefixed()) before finish(),
// which refuses the leftovers, so a misspelt key is an error instead of a silent default.
class config {
 public:
  config(const char* text, std::string policy_name) : policy_(std::move(policy_name)) {
    const char* cursor = text ? text : "";
    troupe_policy_config_item item;
    while (troupe_policy_config_next(&cursor, &item)) {
      std::string key(item.key, item.key_len);
      if (!item.value)
        throw std::invalid_argument("policy '" + policy_ + "': config item '" + key +
                                    "' has no '='; expected key=value");
      if (!items_.emplace(key, std::string(item.value, item.value_len)).second)
        throw std::invalid_argument("policy '" + policy_ + "': config key '" + key + "' is given twice");
    }
  }

  // The value of `key` as a number in [lo, hi], or `def` when absent.
  double number(const std::string& key, double def, double lo, double hi) {
    known_.push_back(key);
    auto it = items_.find(key);
    if (it == items_.end()) return def;
    used_.emplace(key, true);
    return parse(key, it->second, lo, hi);
  }

  // Every item whose key starts with `prefix` ("weight."): (rest of key, number in [lo, hi]).
  std::vector<std::pair<std::string, double>> prefixed(const std::string& prefix, double lo, double hi) {
    known_.push_back(prefix + "<name>");
    std::vector<std::pair<std::string, double>> out;
    for (const auto& [k, v] : items_)
      if (k.size() > prefix.size() && k.compare(0, prefix.size(), prefix) == 0) {
        used_.emplace(k, true);
        out.emplace_back(k.substr(prefix.size()), parse(k, v, lo, hi));
      }
    return out;
  }

  // Throws naming the first unknown key and the known ones.
  void finish() const {
    for (const auto& [k, v] : items_)
      if (!used_.count(k)) {
        std::string known;
        for (const auto& n : known_) known += (known.empty() ? "" : ", ") + n;
        throw std::invalid_argument("policy '" + policy_ + "': unknown config key '" + k + "'; expected " +
                                    (known.empty() ? std::string("no keys") : known));
      }
  }

 private:
  double parse(const std::string& key, const std::string& text, double lo, double hi) const {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size() || !(v >= lo && v <= hi))
      throw std::invalid_argument("policy '" + policy_ + "': config key '" + key + "' is '" + text +
                                  "'; expected a number in [" + fmt(lo) + ", " + fmt(hi) + "]");
    return v;
  }
  static std::string fmt(double v) {
    std::string s = std::to_string(v);
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  std::string policy_;
  std::map<std::string, std::string> items_;
  std::map<std::string, bool> used_;
  std::vector<std::string> known_;
};

// A request as a policy keeps it: the C struct's fields plus an owned tenant string.
struct request {
  int64_t id = 0;
  int64_t arrival_seq = 0;
  int64_t arrival_ns = 0;
  int64_t deadline_ns = 0;
  std::string tenant;
  int32_t priority = 0;
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  int32_t max_output_tokens = 0;
  int32_t cached_prefix_tokens = 0;
  int32_t computed_tokens = 0;
  bool waiting = false;
  bool ever_ran = false;

  void assign(const troupe_policy_request& r) {
    id = r.id;
    arrival_seq = r.arrival_seq;
    arrival_ns = r.arrival_ns;
    deadline_ns = r.deadline_ns;
    if (tenant.size() != r.tenant_len || tenant.compare(0, r.tenant_len, r.tenant, r.tenant_len) != 0)
      tenant.assign(r.tenant, r.tenant_len);
    priority = r.priority;
    prompt_tokens = r.prompt_tokens;
    output_tokens = r.output_tokens;
    max_output_tokens = r.max_output_tokens;
    cached_prefix_tokens = r.cached_prefix_tokens;
    computed_tokens = r.computed_tokens;
  }
};

// The requests a policy knows, with the state transitions the call order allows; a call out of
// order (a host bug) throws, which the guard turns into an error code.
class registry {
 public:
  // on_waiting: a new request, or a running one preempted back to waiting.
  request& enter_waiting(const troupe_policy_request& r) {
    auto [it, fresh] = recs_.try_emplace(r.id);
    if (!fresh && it->second.waiting) throw std::logic_error("request " + std::to_string(r.id) + " is already waiting");
    it->second.assign(r);
    it->second.waiting = true;
    return it->second;
  }
  // on_running: must be waiting.
  request& enter_running(const troupe_policy_request& r) {
    auto& q = at(r.id);
    if (!q.waiting) throw std::logic_error("request " + std::to_string(r.id) + " runs already");
    q.assign(r);
    q.waiting = false;
    q.ever_ran = true;
    return q;
  }
  request& at(int64_t id) {
    auto it = recs_.find(id);
    if (it == recs_.end()) throw std::logic_error("request " + std::to_string(id) + " is unknown to the policy");
    return it->second;
  }
  const request* find(int64_t id) const {
    auto it = recs_.find(id);
    return it == recs_.end() ? nullptr : &it->second;
  }
  void erase(int64_t id) { recs_.erase(id); }
  std::size_t size() const noexcept { return recs_.size(); }

 private:
  std::unordered_map<int64_t, request> recs_;
};

// What a built-in policy implements; the entry points below adapt it to the C table.
class policy {
 public:
  virtual ~policy() = default;
  virtual void on_waiting(const troupe_policy_request& r) = 0;
  virtual void on_running(const troupe_policy_request& r) = 0;
  virtual void on_update(const troupe_policy_request& r) = 0;
  virtual void on_finished(int64_t id) = 0;
  // Writes min(cap, waiting) ids; returns how many.
  virtual uint32_t rank(int64_t now_ns, int64_t* out, uint32_t cap) = 0;
  virtual int64_t victim(int64_t now_ns, const int64_t* candidates, uint32_t n) = 0;

  char error[512] = {};
};

template <class Policy>
struct entry_points {
  static Policy* self(void* p) { return static_cast<Policy*>(p); }

  static int32_t create(const char* text, void** instance, char* err, size_t cap) {
    try {
      config c(text, Policy::name);
      auto p = std::make_unique<Policy>(c);
      c.finish();
      *instance = p.release();
      return TROUPE_POLICY_OK;
    } catch (const std::exception& e) {
      troupe_policy_copy_error(err, cap, e.what());
    } catch (...) {
      troupe_policy_copy_error(err, cap, "unknown C++ exception");
    }
    return TROUPE_POLICY_ERROR;
  }
  static void destroy(void* p) { delete self(p); }
  static int32_t on_waiting(void* p, const troupe_policy_request* r) {
    auto* s = self(p);
    TROUPE_POLICY_GUARD(s->error, { s->on_waiting(*r); })
  }
  static int32_t on_running(void* p, const troupe_policy_request* r) {
    auto* s = self(p);
    TROUPE_POLICY_GUARD(s->error, { s->on_running(*r); })
  }
  static int32_t on_update(void* p, const troupe_policy_request* r) {
    auto* s = self(p);
    TROUPE_POLICY_GUARD(s->error, { s->on_update(*r); })
  }
  static int32_t on_finished(void* p, int64_t id) {
    auto* s = self(p);
    TROUPE_POLICY_GUARD(s->error, { s->on_finished(id); })
  }
  static int32_t rank_waiting(void* p, int64_t now, int64_t* out, uint32_t cap, uint32_t* n) {
    auto* s = self(p);
    TROUPE_POLICY_GUARD(s->error, { *n = s->rank(now, out, cap); })
  }
  static int32_t pick_victim(void* p, int64_t now, const int64_t* c, uint32_t n, int64_t* v) {
    auto* s = self(p);
    TROUPE_POLICY_GUARD(s->error, { *v = s->victim(now, c, n); })
  }
  static const char* last_error(void* p) { return self(p)->error[0] ? self(p)->error : nullptr; }

  static const troupe_policy_api* table() {
    static const troupe_policy_api api = {
        TROUPE_POLICY_ABI_VERSION, sizeof(troupe_policy_api), Policy::name, Policy::description,
        &create, &destroy, &on_waiting, &on_running, &on_update, &on_finished, &rank_waiting, &pick_victim,
        &last_error};
    return &api;
  }
};

}  // namespace troupe_policy_kit

// Defines the plugin's one exported symbol for `Class` (which has static `name` and
// `description` members and a constructor from troupe_policy_kit::config&). The table is returned
// whatever the host's version: the host compares and reports both versions on a mismatch.
#define TROUPE_POLICY_KIT_EXPORT(Class)                                                          \
  extern "C" TROUPE_POLICY_EXPORT const troupe_policy_api* troupe_policy_entry(uint32_t) {       \
    return ::troupe_policy_kit::entry_points<Class>::table();                                    \
  }
