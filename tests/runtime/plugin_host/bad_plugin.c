/* Plugins that fail the host's load-time checks, one per BAD_* define (see CMakeLists.txt). */
#include "plugins/troupe_sched_policy.h"

static int32_t create(const char* c, void** i, char* e, size_t n) {
  (void)c, (void)e, (void)n;
  *i = 0;
  return TROUPE_POLICY_OK;
}
static void destroy(void* i) { (void)i; }
static int32_t note(void* i, const troupe_policy_request* r) { (void)i, (void)r; return TROUPE_POLICY_OK; }
static int32_t gone(void* i, int64_t id) { (void)i, (void)id; return TROUPE_POLICY_OK; }
__attribute__((unused)) static int32_t rank(void* i, int64_t t, int64_t* o, uint32_t c, uint32_t* n) {
  (void)i, (void)t, (void)o, (void)c;
  *n = 0;
  return TROUPE_POLICY_OK;
}
static int32_t victim(void* i, int64_t t, const int64_t* c, uint32_t n, int64_t* v) {
  (void)i, (void)t, (void)n;
  *v = c[0];
  return TROUPE_POLICY_OK;
}

#if defined(BAD_ABI)
#define VERSION 999u
#else
#define VERSION TROUPE_POLICY_ABI_VERSION
#endif
#if defined(BAD_SIZE)
#define SIZE 16u
#else
#define SIZE ((uint32_t)sizeof(troupe_policy_api))
#endif
#if defined(BAD_NO_NAME)
#define NAME ""
#else
#define NAME "bad"
#endif
#if defined(BAD_NULL_FN)
#define RANK 0
#else
#define RANK rank
#endif

__attribute__((unused)) static const troupe_policy_api api = {VERSION, SIZE, NAME, 0, create, destroy, note, note, note, gone, RANK, victim, 0};

#if defined(BAD_NO_ENTRY)
TROUPE_POLICY_EXPORT const troupe_policy_api* not_the_entry(uint32_t v) {
  (void)v;
  return &api;
}
#else
TROUPE_POLICY_EXPORT const troupe_policy_api* troupe_policy_entry(uint32_t v) {
  (void)v;
#if defined(BAD_REFUSE)
  return 0;
#else
  return &api;
#endif
}
#endif
