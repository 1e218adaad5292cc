/* deadline-first: a template scheduling policy in plain C. Earliest deadline first (EDF); requests
 * without a deadline get arrival + default_deadline_ms, or, when that is 0 (the default), come
 * after every request with one, in arrival order. Preempts the running request whose deadline is
 * furthest away. Kept simple on purpose: an array and a linear search (O(n log n) per ranking);
 * see Troupe's built-in policies (plugins/) for O(log n) bookkeeping.
 * Config: default_deadline_ms (>= 0). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <troupe/troupe_sched_policy.h>

typedef struct entry {
  int64_t id;
  int64_t arrival_seq;
  int64_t due_ns; /* INT64_MAX: no deadline */
  int waiting;
} entry;

typedef struct instance {
  int64_t default_deadline_ns;
  entry* entries;
  size_t size, cap;
  entry* scratch; /* for sorting a ranking */
  char error[256];
} instance;

static entry* find(instance* s, int64_t id) {
  for (size_t i = 0; i < s->size; ++i)
    if (s->entries[i].id == id) return &s->entries[i];
  return NULL;
}

static int fail(instance* s, const char* what, int64_t id) {
  snprintf(s->error, sizeof s->error, "%s: request %lld", what, (long long)id);
  return TROUPE_POLICY_ERROR;
}

static int64_t due_of(const instance* s, const troupe_policy_request* r) {
  if (r->deadline_ns != 0) return r->deadline_ns;
  return s->default_deadline_ns > 0 ? r->arrival_ns + s->default_deadline_ns : INT64_MAX;
}

static int earlier(const entry* a, const entry* b) {
  if (a->due_ns != b->due_ns) return a->due_ns < b->due_ns;
  return a->arrival_seq < b->arrival_seq;
}

static int compare(const void* x, const void* y) {
  const entry *a = (const entry*)x, *b = (const entry*)y;
  return earlier(a, b) ? -1 : earlier(b, a) ? 1 : 0;
}

static int32_t create(const char* config, void** out, char* error, size_t error_cap) {
  instance* s = (instance*)calloc(1, sizeof *s);
  const char* cursor = config;
  troupe_policy_config_item item;
  if (!s) {
    troupe_policy_copy_error(error, error_cap, "deadline-first: out of memory");
    return TROUPE_POLICY_ERROR;
  }
  while (troupe_policy_config_next(&cursor, &item)) {
    char value[64], *end;
    double ms;
    if (item.key_len != strlen("default_deadline_ms") || memcmp(item.key, "default_deadline_ms", item.key_len) != 0 ||
        !item.value || item.value_len == 0 || item.value_len >= sizeof value) {
      snprintf(error, error_cap, "deadline-first: unknown or empty config item '%.*s'; expected default_deadline_ms=<ms>",
               (int)item.key_len, item.key);
      free(s);
      return TROUPE_POLICY_ERROR;
    }
    memcpy(value, item.value, item.value_len);
    value[item.value_len] = '\0';
    errno = 0;
    ms = strtod(value, &end);
    if (errno || *end != '\0' || ms < 0 || ms > 1e9) {
      snprintf(error, error_cap, "deadline-first: default_deadline_ms is '%s'; expected a number of ms in [0, 1e9]", value);
      free(s);
      return TROUPE_POLICY_ERROR;
    }
    s->default_deadline_ns = (int64_t)(ms * 1e6);
  }
  *out = s;
  return TROUPE_POLICY_OK;
}

static void destroy(void* p) {
  instance* s = (instance*)p;
  free(s->entries);
  free(s->scratch);
  free(s);
}

static int32_t on_waiting(void* p, const troupe_policy_request* r) {
  instance* s = (instance*)p;
  entry* e = find(s, r->id);
  if (!e) {
    if (s->size == s->cap) {
      size_t cap = s->cap ? 2 * s->cap : 64;
      entry* grown = (entry*)realloc(s->entries, cap * sizeof *grown);
      entry* scratch = (entry*)realloc(s->scratch, cap * sizeof *scratch);
      if (grown) s->entries = grown;
      if (scratch) s->scratch = scratch;
      if (!grown || !scratch) return fail(s, "out of memory", r->id);
      s->cap = cap;
    }
    e = &s->entries[s->size++];
  } else if (e->waiting) {
    return fail(s, "on_waiting for a request already waiting", r->id);
  }
  e->id = r->id;
  e->arrival_seq = r->arrival_seq;
  e->due_ns = due_of(s, r);
  e->waiting = 1;
  return TROUPE_POLICY_OK;
}

static int32_t on_running(void* p, const troupe_policy_request* r) {
  instance* s = (instance*)p;
  entry* e = find(s, r->id);
  if (!e || !e->waiting) return fail(s, "on_running for a request not waiting", r->id);
  e->waiting = 0;
  return TROUPE_POLICY_OK;
}

static int32_t on_update(void* p, const troupe_policy_request* r) {
  instance* s = (instance*)p;
  return find(s, r->id) ? TROUPE_POLICY_OK : fail(s, "on_update for an unknown request", r->id);
}

static int32_t on_finished(void* p, int64_t id) {
  instance* s = (instance*)p;
  entry* e = find(s, id);
  if (!e) return fail(s, "on_finished for an unknown request", id);
  *e = s->entries[--s->size]; /* order of the array does not matter */
  return TROUPE_POLICY_OK;
}

static int32_t rank_waiting(void* p, int64_t now_ns, int64_t* out, uint32_t capacity, uint32_t* num_out) {
  instance* s = (instance*)p;
  size_t n = 0;
  (void)now_ns;
  for (size_t i = 0; i < s->size; ++i)
    if (s->entries[i].waiting) s->scratch[n++] = s->entries[i];
  if (n > 1) qsort(s->scratch, n, sizeof *s->scratch, compare);
  if (n > capacity) n = capacity;
  for (size_t i = 0; i < n; ++i) out[i] = s->scratch[i].id;
  *num_out = (uint32_t)n;
  return TROUPE_POLICY_OK;
}

static int32_t pick_victim(void* p, int64_t now_ns, const int64_t* candidates, uint32_t num, int64_t* victim) {
  instance* s = (instance*)p;
  const entry* best = NULL;
  (void)now_ns;
  for (uint32_t i = 0; i < num; ++i) {
    const entry* e = find(s, candidates[i]);
    if (!e) return fail(s, "pick_victim: unknown candidate", candidates[i]);
    if (!best || earlier(best, e)) best = e;
  }
  *victim = best->id;
  return TROUPE_POLICY_OK;
}

static const char* last_error(void* p) {
  instance* s = (instance*)p;
  return s->error[0] ? s->error : NULL;
}

static const troupe_policy_api api = {
    TROUPE_POLICY_ABI_VERSION, sizeof(troupe_policy_api), "deadline-first",
    "earliest deadline first (template plugin)", create, destroy, on_waiting, on_running, on_update,
    on_finished, rank_waiting, pick_victim, last_error};

TROUPE_POLICY_EXPORT const troupe_policy_api* troupe_policy_entry(uint32_t host_abi_version) {
  (void)host_abi_version; /* the host compares versions and names both on a mismatch */
  return &api;
}
