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

// Brings a mapped file's missing pages into the page cache through read(), in 8 MB chunks, before
// anything touches the mapping. Pages that page faults bring in are cached as small folios; the
// read path's readahead caches large ones, and mapped weights stream from those faster: INT8 batch-1
// decode 5-8%, BF16 2-3% (docs/engine.md, "Weights in the page cache"). Chunks already resident are
// skipped, so a warm cache costs one mincore(). Files over half the machine's memory are left to
// the faults (reading them would only evict their own start).
void fill_page_cache(int fd, const void* map, size_t size) {
  const long page = ::sysconf(_SC_PAGESIZE), phys = ::sysconf(_SC_PHYS_PAGES);
  if (page <= 0 || size == 0 || (phys > 0 && size > static_cast<size_t>(phys) * static_cast<size_t>(page) / 2)) return;
  const size_t pages = (size + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
  std::vector<unsigned char> resident(pages);
  if (::mincore(const_cast<void*>(map), size, resident.data()) != 0) return;  // advice only: never fail a load
  constexpr size_t chunk = size_t{8} << 20;
  const size_t per_chunk = chunk / static_cast<size_t>(page);
  std::vector<uint8_t> buf;
  for (size_t first = 0; first < pages; first += per_chunk) {
    const size_t last = std::min(pages, first + per_chunk);
    if (std::all_of(resident.begin() + first, resident.begin() + last, [](unsigned char r) { return r & 1; })) continue;
    if (buf.empty()) buf.resize(chunk);
    const size_t at = first * static_cast<size_t>(page);
    if (::pread(fd, buf.data(), std::min(chunk, size - at), static_cast<off_t>(at)) < 0) return;
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
    fill_page_cache(fd, p, size_);
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
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return 0;
  const auto first = reinterpret_cast<uintptr_t>(data_);
  return smaps_field_bytes(smaps, first, first + (reserved_ ? reserved_ : size_), reserved_ ? "AnonHugePages" : "FilePmdMapped");
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
