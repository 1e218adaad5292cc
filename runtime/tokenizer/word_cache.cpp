// Thread-local storage of the word cache (see word_cache.hpp).
#include "runtime/tokenizer/word_cache.hpp"

#include <atomic>

namespace troupe::tok {

word_cache& word_cache::local() {
  thread_local word_cache cache;
  return cache;
}

uint32_t next_word_cache_owner() {
  static std::atomic<uint32_t> serial{0};
  uint32_t s = ++serial;
  if (s == 0) s = ++serial;  // after 2^32 tokenizers: skip the "empty" marker
  return s;
}

}  // namespace troupe::tok
