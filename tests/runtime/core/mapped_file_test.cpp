// mapped_file: the mapping shows the file's bytes, and opening it brings the file's pages into the
// page cache in 2 MB folios, before the first access faults them in one by one.
#define BOOST_TEST_MODULE runtime_core
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/core/mapped_file.hpp"

namespace {

// A 24 MB file of known bytes, written and then dropped from the page cache.
std::string cold_file() {
  const std::string path = (std::filesystem::temp_directory_path() / ("troupe_mapped_file_" + std::to_string(::getpid()))).string();
  std::vector<uint8_t> bytes(size_t{24} << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  FILE* f = std::fopen(path.c_str(), "wb");
  BOOST_REQUIRE(f);
  BOOST_REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
  const int fd = ::open(path.c_str(), O_RDONLY);
  BOOST_REQUIRE(fd >= 0);
  ::fdatasync(fd);  // clean pages can be dropped
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return path;
}

// A 24 MB file of the same bytes written 4 KB at a time (the page cache then holds it in small
// folios, as after `cp` or a download), left dirty and cached.
std::string file_in_small_writes(const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()))).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  BOOST_REQUIRE(f);
  std::vector<uint8_t> piece(4096);
  for (size_t at = 0; at < (size_t{24} << 20); at += piece.size()) {
    for (size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<uint8_t>((at + i) * 131 + ((at + i) >> 12));
    BOOST_REQUIRE(::write(fileno(f), piece.data(), piece.size()) == static_cast<ssize_t>(piece.size()));
  }
  std::fclose(f);
  return path;
}

// FilePmdMapped bytes of a plain mapping of `path` after reading it in (MADV_HUGEPAGE if `advise`).
size_t pmd_bytes_of_plain_mapping(const std::string& path, bool advise) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  BOOST_REQUIRE(fd >= 0);
  const size_t size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  BOOST_REQUIRE(p != MAP_FAILED);
  if (advise) ::madvise(p, size, MADV_HUGEPAGE);
  size_t sum = 0;
  for (size_t i = 0; i < size; i += 4096) sum += static_cast<const uint8_t*>(p)[i];
  BOOST_TEST(sum > 0u);
  std::ifstream smaps("/proc/self/smaps");
  const auto first = reinterpret_cast<uintptr_t>(p);
  const size_t pmd = smaps ? troupe::smaps_field_bytes(smaps, first, first + size, "FilePmdMapped") : 0;
  ::munmap(p, size);
  ::close(fd);
  return pmd;
}

size_t resident_pages(const troupe::mapped_file& m) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((m.size() + page - 1) / page);
  BOOST_REQUIRE(::mincore(const_cast<uint8_t*>(m.data()), m.size(), v.data()) == 0);
  size_t n = 0;
  for (unsigned char r : v) n += r & 1;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(opening_a_cold_file_fills_the_page_cache_and_maps_its_bytes) {
  const std::string path = cold_file();
  {
    const int fd = ::open(path.c_str(), O_RDONLY);
    void* probe = ::mmap(nullptr, size_t{24} << 20, PROT_READ, MAP_PRIVATE, fd, 0);
    std::vector<unsigned char> v((size_t{24} << 20) / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
    ::mincore(probe, size_t{24} << 20, v.data());
    size_t before = 0;
    for (unsigned char r : v) before += r & 1;
    ::munmap(probe, size_t{24} << 20);
    ::close(fd);
    if (before == v.size()) {  // the kernel kept the pages: nothing to show on this machine
      std::filesystem::remove(path);
      BOOST_TEST_MESSAGE("page cache did not drop the file; residency not checked");
      return;
    }
  }
  troupe::mapped_file m(path);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  BOOST_TEST(resident_pages(m) == (m.size() + page - 1) / page);  // before any access to the mapping
  bool same = true;
  for (size_t i = 0; i < m.size(); i += 4093) same = same && m.data()[i] == static_cast<uint8_t>(i * 131 + (i >> 12));
  BOOST_TEST(same);
  std::filesystem::remove(path);
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_an_error_naming_it) {
  try {
    troupe::mapped_file m("/nonexistent/troupe/weights.safetensors");
    BOOST_ERROR("opened a missing file");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("/nonexistent/troupe/weights.safetensors") != std::string::npos);
  }
}

// The engine benchmark reports how much of the weights 2 MB pages map (docs/engine.md, "Weights in
// the page cache"): the smaps fields of the mappings that overlap the file's range, and no others.
BOOST_AUTO_TEST_CASE(smaps_fields_are_summed_over_the_mappings_of_a_range) {
  const std::string text =
      "7f0000000000-7f0000400000 r--p 00000000 fe:01 12  /models/a:b/model.safetensors\n"
      "Rss:                4096 kB\n"
      "FilePmdMapped:      4096 kB\n"
      "7f0000400000-7f0000600000 r--p 00400000 fe:01 12  /models/a:b/model.safetensors\n"
      "FilePmdMapped:      2048 kB\n"
      "7f0000600000-7f0000800000 rw-p 00000000 00:00 0 \n"
      "AnonHugePages:      2048 kB\n"
      "FilePmdMapped:      2048 kB\n";
  std::istringstream a(text), b(text), c(text), d(text);
  BOOST_TEST(troupe::smaps_field_bytes(a, 0x7f0000000000, 0x7f0000600000, "FilePmdMapped") == size_t{6144} * 1024);
  BOOST_TEST(troupe::smaps_field_bytes(b, 0x7f0000400000, 0x7f0000500000, "FilePmdMapped") == size_t{2048} * 1024);
  BOOST_TEST(troupe::smaps_field_bytes(c, 0x7f0000000000, 0x7f0000800000, "AnonHugePages") == size_t{2048} * 1024);
  BOOST_TEST(troupe::smaps_field_bytes(d, 0x7e0000000000, 0x7e0000100000, "FilePmdMapped") == 0u);
}

// On a live mapping the count stays within the file (a mapping from the process's own smaps).
BOOST_AUTO_TEST_CASE(huge_page_bytes_of_a_mapping_stay_within_it) {
  const std::string path = cold_file();
  for (const auto where : {troupe::residency::mapped, troupe::residency::huge_pages}) {
    troupe::mapped_file m(path, where);
    size_t sum = 0;
    for (size_t i = 0; i < m.size(); i += 4096) sum += m.data()[i];  // fault every page in
    BOOST_TEST(sum > 0u);
    BOOST_TEST(m.huge_page_bytes() <= (m.size() + (size_t{2} << 20)));
  }
  std::filesystem::remove(path);
}

// A file the page cache holds in small folios is re-read into 2 MB ones at open, so 2 MB pages map
// it (docs/engine.md, "Weights in the page cache"). Where the kernel or file system makes no 2 MB
// folios even for a file read in cold (checked on a second file), there is nothing to show.
BOOST_AUTO_TEST_CASE(a_file_cached_in_small_folios_is_mapped_with_2mb_pages_after_opening) {
  const std::string path = file_in_small_writes("troupe_small_folios_");
  if (pmd_bytes_of_plain_mapping(path, false) >= (size_t{20} << 20)) {
    std::filesystem::remove(path);
    BOOST_TEST_MESSAGE("the kernel cached 4 KB writes in 2 MB folios; nothing to heal on this machine");
    return;
  }
  {
    const troupe::mapped_file m(path);
    bool same = true;
    for (size_t i = 0; i < m.size(); i += 4093) same = same && m.data()[i] == static_cast<uint8_t>(i * 131 + (i >> 12));
    BOOST_TEST(same);
    const size_t pmd = m.huge_page_bytes();
    if (pmd == 0) {
      const std::string cold = cold_file();  // can this machine make 2 MB folios at all?
      const size_t capable = pmd_bytes_of_plain_mapping(cold, true);
      std::filesystem::remove(cold);
      if (capable > 0) BOOST_ERROR("no 2 MB pages after opening, though a cold read gets " << capable << " bytes of them");
      else BOOST_TEST_MESSAGE("no 2 MB page-cache folios on this machine; nothing to show");
    } else {
      BOOST_TEST(pmd >= (size_t{22} << 20));  // of the file's 24 MB
    }
  }
  std::filesystem::remove(path);
}
