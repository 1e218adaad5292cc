// mapped_file: the mapping shows the file's bytes, and opening it brings the file's pages into the
// page cache through read() (large folios), before the first access faults them in one by one.
#define BOOST_TEST_MODULE runtime_core
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
