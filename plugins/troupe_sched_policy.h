/* troupe_sched_policy.h: the whole contract between Troupe's scheduler and a scheduling-policy
 * plugin. C types only, versioned by TROUPE_POLICY_ABI_VERSION and by the size fields of the two
 * structs; the scheduler keeps the mechanics (budgets, KV blocks, chunking), a policy only orders
 * and chooses. docs/plugins.md explains the call order and the threading rules in full.
 *
 * A plugin is a shared library that exports one symbol, troupe_policy_entry, returning a static
 * troupe_policy_api table. The host (runtime/plugin_host) loads it with dlopen, accepts it only
 * when abi_version equals its own and struct_size covers every field it calls, and treats any
 * error code, invented id or malformed answer as misbehaviour: it logs why, counts it in its
 * metrics and falls back to first come, first served for the rest of that policy's life.
 *
 * Call order for one request (every call for one instance comes from one thread at a time):
 *   on_waiting -> (on_running -> on_update* -> [on_waiting again if preempted] ...)* -> on_finished
 * on_finished may come from either state (finished, cancelled, deadline passed).
 * Once per scheduling step with room for new sequences: rank_waiting. When KV blocks run out
 * while decoding: pick_victim (possibly several times in one step). */
#ifndef TROUPE_SCHED_POLICY_H
#define TROUPE_SCHED_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change; the host loads only an exact match. Fields are only ever
 * appended within one version, which struct_size lets each side detect. */
#define TROUPE_POLICY_ABI_VERSION 1u

/* Every call that can fail returns one of these. Anything but OK makes the host fall back. */
#define TROUPE_POLICY_OK 0
#define TROUPE_POLICY_ERROR (-1)

/* One request as the scheduler sees it. Valid only during the call: copy what you keep (the
 * tenant string in particular). Times are nanoseconds on the host's monotonic clock, the same
 * clock as the now_ns argument of rank_waiting and pick_victim. */
typedef struct troupe_policy_request {
  uint32_t struct_size;         /* sizeof(troupe_policy_request) as the host compiled it */
  uint32_t tenant_len;          /* bytes of tenant, without the terminating NUL */
  int64_t id;                   /* unique while the request lives; the only id a policy may return */
  int64_t arrival_seq;          /* order in which the scheduler first queued it: unique, increasing */
  int64_t arrival_ns;           /* when it was first queued (kept across preemption) */
  int64_t deadline_ns;          /* 0: none */
  const char* tenant;           /* NUL-terminated; "" when the client named none */
  int32_t priority;             /* lower is more urgent (vLLM's convention); may be negative */
  int32_t prompt_tokens;
  int32_t output_tokens;        /* generated so far; kept when preempted (they are recomputed) */
  int32_t max_output_tokens;    /* the most it may generate: work left is max - output */
  int32_t cached_prefix_tokens; /* leading prompt tokens already in the KV cache */
  int32_t computed_tokens;      /* tokens whose K/V are in the pool now (0 while waiting) */
} troupe_policy_request;

typedef struct troupe_policy_api {
  uint32_t abi_version;  /* TROUPE_POLICY_ABI_VERSION the plugin was built with */
  uint32_t struct_size;  /* sizeof(troupe_policy_api) as the plugin compiled it */
  const char* name;      /* short name for logs and metrics, e.g. "fair-share" */
  const char* description; /* one line; may be NULL */

  /* Makes one instance. `config` is the operator's policy_config string verbatim (NUL-terminated,
   * possibly empty): comma-, semicolon- or newline-separated key=value items, see
   * troupe_policy_config_next below. On failure write a message that names the key and what was
   * expected into error[0..error_cap) (NUL-terminated) and return TROUPE_POLICY_ERROR. The host
   * may hold two instances of one plugin at once (during a swap). */
  int32_t (*create)(const char* config, void** instance, char* error, size_t error_cap);
  /* Frees an instance; no call on it follows. */
  void (*destroy)(void* instance);

  /* The request entered the waiting queue: it arrived, it was preempted (back to waiting, its
   * output kept), or the policy was just swapped in and is told the queues as they are. */
  int32_t (*on_waiting)(void* instance, const troupe_policy_request* request);
  /* The request left the waiting queue and runs (admitted). */
  int32_t (*on_running)(void* instance, const troupe_policy_request* request);
  /* A field changed: tokens computed or generated in a step, or its cached prefix length. */
  int32_t (*on_update)(void* instance, const troupe_policy_request* request);
  /* The request left the server (finished, cancelled, deadline): forget it. */
  int32_t (*on_finished)(void* instance, int64_t id);

  /* Admission order: write exactly min(capacity, number of waiting requests) distinct ids of
   * waiting requests into out_ids, most deserving first, and that count into *num_out. The
   * scheduler admits them in this order while budget and KV blocks last and stops at the first
   * one that does not fit (so a large request at the head is not overtaken forever). */
  int32_t (*rank_waiting)(void* instance, int64_t now_ns, int64_t* out_ids, uint32_t capacity,
                          uint32_t* num_out);
  /* KV blocks ran out: choose which of the `candidates` (running requests not yet planned this
   * step; never empty) to preempt first. Its blocks are freed and it is recomputed later. */
  int32_t (*pick_victim)(void* instance, int64_t now_ns, const int64_t* candidates,
                         uint32_t num_candidates, int64_t* victim);

  /* The message of the last failed call on this instance (NUL-terminated, valid until the next
   * call), or NULL. Optional: the pointer may be NULL. */
  const char* (*last_error)(void* instance);
} troupe_policy_api;

/* The one symbol a plugin exports. host_abi_version lets a plugin that supports several
 * versions choose its table, or return NULL to refuse. */
#define TROUPE_POLICY_ENTRY_NAME "troupe_policy_entry"
typedef const troupe_policy_api* (*troupe_policy_entry_fn)(uint32_t host_abi_version);

#if defined(_WIN32)
#define TROUPE_POLICY_EXPORT __declspec(dllexport)
#else
#define TROUPE_POLICY_EXPORT __attribute__((visibility("default")))
#endif

/* ---- Plugin-side helpers (inline, nothing crosses the boundary) ---------------------------- */

/* Copies msg into buf[0..cap) with a terminating NUL, cutting it if needed. */
static inline void troupe_policy_copy_error(char* buf, size_t cap, const char* msg) {
  size_t n;
  if (buf == NULL || cap == 0) return;
  n = msg ? strlen(msg) : 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(buf, msg, n);
  buf[n] = '\0';
}

/* One key=value item of a config string. Pointers into the string; not NUL-terminated. */
typedef struct troupe_policy_config_item {
  const char* key;
  size_t key_len;
  const char* value;  /* NULL when the item has no '=' */
  size_t value_len;
} troupe_policy_config_item;

/* Walks `*cursor` (start it at the config string): fills *item with the next non-empty item,
 * spaces around keys and values trimmed, and returns 1; returns 0 at the end. */
static inline int troupe_policy_config_next(const char** cursor, troupe_policy_config_item* item) {
  const char* p = *cursor;
  for (;;) {
    const char *b, *e, *eq;
    while (*p == ',' || *p == ';' || *p == '\n' || *p == '\r' || *p == ' ' || *p == '\t') ++p;
    if (*p == '\0') {
      *cursor = p;
      return 0;
    }
    b = p;
    while (*p != '\0' && *p != ',' && *p != ';' && *p != '\n') ++p;
    e = p;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) --e;
    if (e == b) continue;
    eq = (const char*)memchr(b, '=', (size_t)(e - b));
    item->key = b;
    item->key_len = (size_t)((eq ? eq : e) - b);
    while (item->key_len && (b[item->key_len - 1] == ' ' || b[item->key_len - 1] == '\t')) --item->key_len;
    item->value = NULL;
    item->value_len = 0;
    if (eq) {
      const char* v = eq + 1;
      while (v < e && (*v == ' ' || *v == '\t')) ++v;
      item->value = v;
      item->value_len = (size_t)(e - v);
    }
    *cursor = p;
    return 1;
  }
}

#ifdef __cplusplus
} /* extern "C" */

/* C++ plugins: an exception must never leave a C entry point (that is undefined behaviour; the
 * host catches what it can but the instance is then abandoned). Wrap each body:
 *
 *   int32_t my_rank(void* p, int64_t now, int64_t* out, uint32_t cap, uint32_t* n) {
 *     auto* self = static_cast<my_policy*>(p);
 *     TROUPE_POLICY_GUARD(self->error, { self->rank(now, out, cap, n); })
 *   }
 *
 * `errbuf` is a char array of the instance (its size is taken with sizeof); the body returns
 * nothing; the macro returns TROUPE_POLICY_OK, or TROUPE_POLICY_ERROR with the exception's
 * what() in errbuf, which the plugin's last_error should return. */
#include <exception>
#define TROUPE_POLICY_GUARD(errbuf, ...)                                  \
  try {                                                                   \
    __VA_ARGS__                                                           \
  } catch (const std::exception& troupe_policy_e_) {                      \
    troupe_policy_copy_error((errbuf), sizeof(errbuf), troupe_policy_e_.what()); \
    return TROUPE_POLICY_ERROR;                                           \
  } catch (...) {                                                         \
    troupe_policy_copy_error((errbuf), sizeof(errbuf), "unknown C++ exception"); \
    return TROUPE_POLICY_ERROR;                                           \
  }                                                                       \
  return TROUPE_POLICY_OK;
#endif

#endif /* TROUPE_SCHED_POLICY_H */
