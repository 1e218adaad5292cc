#include "runtime/core/mapped_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
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
  }
  ::close(fd);  // the mapping keeps the file alive
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
