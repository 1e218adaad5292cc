// A policy that behaves like fcfs until told to misbehave: config mode=<how>, after=<n> (the
// number of rank_waiting / pick_victim / on_update calls answered well first). Exercises every
// containment path of the host.
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugins/troupe_sched_policy.h"

namespace {

struct rogue {
  std::string mode = "ok";
  long after = 0;
  long calls = 0;
  std::map<int64_t, int64_t> waiting;  // arrival_seq -> id
  std::map<int64_t, int64_t> seq_of;   // id -> arrival_seq
  std::set<int64_t> running;
  char error[256] = {};

  bool bad(const char* m) { return mode == m && calls++ >= after; }
};

rogue* self(void* p) { return static_cast<rogue*>(p); }

int32_t create(const char* config, void** out, char* err, size_t cap) {
  auto r = new rogue;
  const char* cursor = config;
  troupe_policy_config_item it;
  while (troupe_policy_config_next(&cursor, &it)) {
    std::string k(it.key, it.key_len), v(it.value ? it.value : "", it.value_len);
    if (k == "mode") r->mode = v;
    else if (k == "after") r->after = std::atol(v.c_str());
  }
  if (r->mode == "fail_create") {
    delete r;
    troupe_policy_copy_error(err, cap, "rogue: told to fail in create");
    return TROUPE_POLICY_ERROR;
  }
  *out = r;
  return TROUPE_POLICY_OK;
}
void destroy(void* p) { delete self(p); }

int32_t on_waiting(void* p, const troupe_policy_request* q) {
  auto* s = self(p);
  s->running.erase(q->id);
  s->waiting[q->arrival_seq] = q->id;
  s->seq_of[q->id] = q->arrival_seq;
  return TROUPE_POLICY_OK;
}
int32_t on_running(void* p, const troupe_policy_request* q) {
  auto* s = self(p);
  s->waiting.erase(q->arrival_seq);
  s->running.insert(q->id);
  return TROUPE_POLICY_OK;
}
int32_t on_update(void* p, const troupe_policy_request*) {
  auto* s = self(p);
  if (s->bad("error_update")) {
    troupe_policy_copy_error(s->error, sizeof s->error, "update exploded");
    return TROUPE_POLICY_ERROR;
  }
  return TROUPE_POLICY_OK;
}
int32_t on_finished(void* p, int64_t id) {
  auto* s = self(p);
  auto it = s->seq_of.find(id);
  if (it != s->seq_of.end()) s->waiting.erase(it->second), s->seq_of.erase(it);
  s->running.erase(id);
  return TROUPE_POLICY_OK;
}

void fcfs_rank(rogue* s, int64_t* out, uint32_t cap, uint32_t* n) {
  *n = 0;
  for (auto& [seq, id] : s->waiting) {
    if (*n == cap) break;
    out[(*n)++] = id;
  }
}

// NOTE: no TROUPE_POLICY_GUARD here on purpose, for mode=throw_raw.
int32_t rank_waiting(void* p, int64_t, int64_t* out, uint32_t cap, uint32_t* n) {
  auto* s = self(p);
  if (s->bad("throw_raw")) throw std::runtime_error("escaped from rank_waiting");
  if (s->bad("throw_guarded")) {
    TROUPE_POLICY_GUARD(s->error, { throw std::runtime_error("caught by the guard"); })
  }
  fcfs_rank(s, out, cap, n);
  if (s->bad("invent") && *n > 0) out[0] = 987654;
  if (s->bad("duplicate") && *n > 1) out[1] = out[0];
  if (s->bad("short") && *n > 0) --*n;
  if (s->bad("running") && *n > 0 && !s->running.empty()) out[0] = *s->running.begin();
  if (s->bad("error_rank")) {
    troupe_policy_copy_error(s->error, sizeof s->error, "rank exploded");
    return TROUPE_POLICY_ERROR;
  }
  if (s->mode == "starve" && *n > 0 && s->waiting.size() > cap) {
    // Every waiting request but the oldest, in arrival order: the oldest never makes the cut.
    *n = 0;
    for (auto it = std::next(s->waiting.begin()); it != s->waiting.end() && *n < cap; ++it) out[(*n)++] = it->second;
  }
  return TROUPE_POLICY_OK;
}
int32_t pick_victim(void* p, int64_t, const int64_t* c, uint32_t n, int64_t* v) {
  auto* s = self(p);
  *v = s->bad("bad_victim") ? 424242 : c[n - 1];
  return TROUPE_POLICY_OK;
}
const char* last_error(void* p) { return self(p)->error[0] ? self(p)->error : nullptr; }

const troupe_policy_api api = {TROUPE_POLICY_ABI_VERSION, sizeof(troupe_policy_api), "rogue", "misbehaves on demand",
                               create, destroy, on_waiting, on_running, on_update, on_finished, rank_waiting,
                               pick_victim, last_error};

}  // namespace

extern "C" TROUPE_POLICY_EXPORT const troupe_policy_api* troupe_policy_entry(uint32_t) { return &api; }
