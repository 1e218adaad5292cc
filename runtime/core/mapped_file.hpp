// A read-only view of a whole file: by default a memory mapping (checkpoints used in place, pages
// shared with the page cache and other processes), or, on request, a private copy on 2 MB pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <memory>
#include <string>

namespace troupe {

// Where a file's bytes live once opened.
//   mapped:     mmap of the file (default): no copy; at open the file is put in 2 MB page-cache
//               folios (missing pages read in, small folios read back once) and mapped
//               (mapped_file.cpp), so a warm cache in 2 MB folios opens instantly.
//   huge_pages: read into anonymous memory advised MADV_HUGEPAGE (what llama.cpp's --no-mmap
//               does, plus huge pages). Costs a read of the file at load and memory not shared
//               with other processes; streams ~10-20% faster for decode, whose every token reads
//               all weights (fewer TLB misses: bench/machine measures both page sizes).
enum class residency { mapped, huge_pages };

// Anonymous read-write memory of at least `bytes`, starting on a 2 MB boundary and advised
// MADV_HUGEPAGE (advice: the kernel may still give 4 KB pages). `reserved` gets the length to hand
// to release_huge_pages. Throws troupe::error(io_error) naming `what` it was for when there is none.
// mapped_file reads checkpoints into it; quantize-on-load keeps its codes in it (--no-mmap).
uint8_t* allocate_huge_pages(size_t bytes, size_t& reserved, const std::string& what);
void release_huge_pages(void* start, size_t reserved) noexcept;
// The same memory owned: released when the last copy goes (quantized weight slabs, the KV pool).
std::shared_ptr<uint8_t> huge_page_buffer(size_t bytes, const std::string& what);

// The sum of `field` ("FilePmdMapped", "AnonHugePages", ...) in bytes over the mappings of a
// /proc/PID/smaps text that overlap [first, last). mapped_file::huge_page_bytes reads its own.
size_t smaps_field_bytes(std::istream& smaps, uintptr_t first, uintptr_t last, const std::string& field);

class mapped_file {
 public:
  mapped_file() = default;
  // Throws troupe::error(io_error) naming the path when the file cannot be opened or mapped.
  explicit mapped_file(const std::string& path, residency where = residency::mapped);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }
  bool is_copy() const noexcept { return reserved_ != 0; }  // residency::huge_pages
  // Bytes of the file's memory that are mapped with 2 MB pages right now (Linux: the mapping's
  // FilePmdMapped, or AnonHugePages for a copy, from /proc/self/smaps; 0 where unknown). A file
  // mapping gets them where the page cache holds the file in 2 MB folios (docs/engine.md,
  // "Weights in the page cache"): what the benchmarks report beside their decode figures.
  size_t huge_page_bytes() const;

 private:
  void reset() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t reserved_ = 0;  // bytes of the anonymous mapping (huge_pages), 0 for a file mapping
};

}  // namespace troupe
