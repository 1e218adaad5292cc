// A std::vector whose storage starts on a 64-byte (cache-line) boundary.
//
// The engine's activation rows are what every matmul tile loads 16 floats at a time. glibc hands
// out large blocks 16 bytes past a page boundary, so with plain std::vector each of those 64-byte
// loads straddled two cache lines: batched decode (32 rows) ran its matmuls ~8% slower for it
// (`troupe-bench-matmul --n 8 16 32 --shape model`, docs/benchmarks.md). Rows whose length is a
// multiple of 16 floats then stay aligned too.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace troupe {

template <class T, std::size_t Align = 64>
struct aligned_allocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = aligned_allocator<U, Align>;
  };
  aligned_allocator() noexcept = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U, Align>&) noexcept {}

  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{Align})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{Align}); }

  template <class U>
  bool operator==(const aligned_allocator<U, Align>&) const noexcept {
    return true;
  }
};

template <class T>
using aligned_vector = std::vector<T, aligned_allocator<T>>;

}  // namespace troupe
