#include "runtime/core/mapped_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/core/error.hpp"

namespace troupe {

uint8_t* allocate_huge_pages(size_t bytes, size_t& reserved, const std::string& what) {
  constexpr size_t huge = size_t{2} << 20;
  reserved = (std::max<size_t>(bytes, 1) + huge - 1) / huge * huge;
  const size_t span = reserved + huge;  // room to align the start
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw_error(errc::io_error, "cannot allocate " + std::to_string(bytes) + " bytes for " + what + ": " +
                                    std::strerror(errno));
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + huge - 1) / huge * huge;
  if (start > base) ::munmap(p, start - base);
  if (base + span > start + reserved) ::munmap(reinterpret_cast<void*>(start + reserved), base + span - start - reserved);
  ::madvise(reinterpret_cast<void*>(start), reserved, MADV_HUGEPAGE);  // advice: 4 KB pages if declined
  return reinterpret_cast<uint8_t*>(start);
}

void release_huge_pages(void* start, size_t reserved) noexcept {
  if (start) ::munmap(start, reserved);
}

std::shared_ptr<uint8_t> huge_page_buffer(size_t bytes, const std::string& what) {
  size_t reserved = 0;
  uint8_t* p = allocate_huge_pages(bytes, reserved, what);
  return std::shared_ptr<uint8_t>(p, [reserved](uint8_t* q) { release_huge_pages(q, reserved); });
}

namespace {

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL and the reads below take over
#endif

constexpr size_t huge_page = size_t{2} << 20;
constexpr size_t cache_chunk = size_t{8} << 20;

// `field` bytes of this process's mappings over [p, p + size) (0 where /proc is missing).
size_t own_smaps_bytes(const void* p, size_t size, const char* field) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return 0;
  const auto first = reinterpret_cast<uintptr_t>(p);
  return smaps_field_bytes(smaps, first, first + size, field);
}

size_t pmd_mapped(const uint8_t* map, size_t size) { return own_smaps_bytes(map, size, "FilePmdMapped"); }

bool populate(const uint8_t* p, size_t n) { return ::madvise(const_cast<uint8_t*>(p), n, MADV_POPULATE_READ) == 0; }

// Drops [at, at + n) of the file from the page cache and reads it back through the mapping, whose
// faults (MADV_HUGEPAGE) read 2 MB folios. Our own page tables go first: mapped pages are not dropped.
void reread(int fd, const uint8_t* map, size_t at, size_t n) {
  ::madvise(const_cast<uint8_t*>(map) + at, n, MADV_DONTNEED);
  ::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
  populate(map + at, n);
}

// The old way, for kernels without MADV_POPULATE_READ: pread() the missing chunks (readahead's
// large folios, but their order restarts at every gap).
void read_missing(int fd, const std::vector<unsigned char>& resident, size_t per_chunk, size_t page, size_t size) {
  std::vector<uint8_t> buf;
  for (size_t first = 0; first < resident.size(); first += per_chunk) {
    const size_t last = std::min(resident.size(), first + per_chunk);
    if (std::all_of(resident.begin() + first, resident.begin() + last, [](unsigned char r) { return r & 1; })) continue;
    if (buf.empty()) buf.resize(cache_chunk);
    const size_t at = first * page;
    if (::pread(fd, buf.data(), std::min(cache_chunk, size - at), static_cast<off_t>(at)) < 0) return;
  }
}

// Puts a mapped file in 2 MB page-cache folios and maps it, before the first decode step touches
// it: the kernel maps a 2 MB folio with one 2 MB page, and decode streams weights from those with
// fewer TLB misses (1-3% faster here than from 4 KB pages; docs/engine.md, "Weights in the page cache").
//   - 8 MB chunks missing from the cache, wholly or partly, are read in through the mapping with
//     MADV_HUGEPAGE (a partly cached chunk is dropped first: its pages are small folios);
//   - the rest is mapped, and if 2 MB pages then map under 90% of the file, the chunks that were
//     cached are re-read the same way (a file copied with `cp` or downloaded in small writes sits
//     in 4 KB folios until evicted). That costs one read of the file, once: the next load finds
//     it in 2 MB folios. Where the kernel or file system makes no 2 MB folios (the first chunk
//     re-read gives none), it stops there.
// A warm cache in 2 MB folios costs one mincore() and one pass over the page tables. Files over
// half the machine's memory are left to the faults (reading them would evict their own start).
// TROUPE_KEEP_PAGE_CACHE=1 skips the re-reads (the page cache of a file is left as it is).
void cache_in_large_folios(int fd, const uint8_t* map, size_t size) {
  const long page_l = ::sysconf(_SC_PAGESIZE), phys = ::sysconf(_SC_PHYS_PAGES);
  if (page_l <= 0 || size == 0 || (phys > 0 && size > static_cast<size_t>(phys) * static_cast<size_t>(page_l) / 2)) return;
  const auto page = static_cast<size_t>(page_l);
  const size_t pages = (size + page - 1) / page, per_chunk = cache_chunk / page;
  std::vector<unsigned char> resident(pages);
  if (::mincore(const_cast<uint8_t*>(map), size, resident.data()) != 0) return;  // advice only: never fail a load
  ::madvise(const_cast<uint8_t*>(map), size, MADV_HUGEPAGE);
  std::vector<size_t> cached;  // offsets of the chunks that were wholly in the cache
  for (size_t first = 0; first < pages; first += per_chunk) {
    const size_t last = std::min(pages, first + per_chunk), at = first * page, n = std::min(cache_chunk, size - at);
    const auto held = static_cast<size_t>(
        std::count_if(resident.begin() + first, resident.begin() + last, [](unsigned char r) { return r & 1; }));
    if (held == last - first) {
      cached.push_back(at);
      continue;
    }
    if (held > 0) ::posix_fadvise(fd, static_cast<off_t>(at), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
    if (!populate(map + at, n)) return read_missing(fd, resident, per_chunk, page, size);
  }
  populate(map, size);  // maps the cached chunks (page tables only), so smaps counts them
  const size_t whole = size / huge_page * huge_page;
  if (whole == 0 || cached.empty()) return;
  const char* keep = std::getenv("TROUPE_KEEP_PAGE_CACHE");
  if (keep && *keep && std::string(keep) != "0") return;
  size_t pmd = pmd_mapped(map, size);
  if (pmd >= whole / 10 * 9) return;
  ::fdatasync(fd);  // a file just written is dirty, and dirty pages are not dropped
  for (size_t at : cached) {
    reread(fd, map, at, std::min(cache_chunk, size - at));
    if (pmd == 0 && (pmd = pmd_mapped(map, size)) == 0) return;  // no 2 MB folios here
  }
}

}  // namespace

mapped_file::mapped_file(const std::string& path, residency where) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(errc::io_error, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw_error(errc::io_error, "cannot stat " + path + ": " + std::strerror(e));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0 && where == residency::huge_pages) {
    uint8_t* dst = nullptr;
    try {
      dst = allocate_huge_pages(size_, reserved_, "reading " + path + " into");
    } catch (...) {
      ::close(fd);
      throw;
    }
    data_ = dst;
    for (size_t done = 0; done < size_;) {
      const ssize_t got = ::pread(fd, dst + done, std::min<size_t>(size_ - done, size_t{64} << 20),
                                  static_cast<off_t>(done));
      if (got <= 0) {
        const int e = got < 0 ? errno : EIO;
        ::close(fd);
        reset();
        throw_error(errc::io_error, "cannot read " + path + ": " + (got < 0 ? std::strerror(e) : "file shrank while read"));
      }
      done += static_cast<size_t>(got);
    }
    ::mprotect(dst, reserved_, PROT_READ);  // read-only, as a file mapping is
  } else if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw_error(errc::io_error, "cannot mmap " + path + ": " + std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
    cache_in_large_folios(fd, static_cast<const uint8_t*>(p), size_);
  }
  ::close(fd);  // the mapping keeps the file alive
}

size_t smaps_field_bytes(std::istream& smaps, uintptr_t first, uintptr_t last, const std::string& field) {
  const std::string key = field + ":";
  size_t kb = 0;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long lo = 0, hi = 0;
    // A mapping's header ("start-end perms offset dev inode path"); its fields ("Name:   N kB")
    // have their colon before the first space.
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo < last && hi > first;
      continue;
    }
    if (inside && line.rfind(key, 0) == 0) kb += std::strtoull(line.c_str() + key.size(), nullptr, 10);
  }
  return static_cast<size_t>(kb) * 1024;
}

size_t mapped_file::huge_page_bytes() const {
  if (!data_) return 0;
  return reserved_ ? own_smaps_bytes(data_, reserved_, "AnonHugePages") : pmd_mapped(data_, size_);
}

mapped_file::~mapped_file() { reset(); }

mapped_file::mapped_file(mapped_file&& o) noexcept
    : path_(std::move(o.path_)), data_(o.data_), size_(o.size_), reserved_(o.reserved_) {
  o.data_ = nullptr;
  o.size_ = 0;
  o.reserved_ = 0;
}

mapped_file& mapped_file::operator=(mapped_file&& o) noexcept {
  if (this != &o) {
    reset();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    reserved_ = o.reserved_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.reserved_ = 0;
  }
  return *this;
}

void mapped_file::reset() noexcept {
  if (data_ && reserved_) release_huge_pages(const_cast<uint8_t*>(data_), reserved_);
  else if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
  reserved_ = 0;
}

}  // namespace troupe
