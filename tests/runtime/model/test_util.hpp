// Helpers of the model tests: temporary directories, raw file edits and error assertions.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>

#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"

namespace troupe::test {

namespace fs = std::filesystem;

inline std::string golden(const std::string& set) {
  return std::string(TROUPE_TEST_DATA_DIR) + "/golden/" + set;
}

inline std::string tokenizer_dir() { return std::string(TROUPE_SOURCE_DIR) + "/models/qwen3-tokenizer"; }

// A fresh directory under the system temp dir, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "troupe-model-test-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const fs::path& path() const { return path_; }
  std::string str(const std::string& child = "") const {
    return child.empty() ? path_.string() : (path_ / child).string();
  }

 private:
  fs::path path_;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
  BOOST_REQUIRE(out.good());
}

// A safetensors file from a header text and data bytes, for headers the writer would never make.
inline std::string raw_safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

inline void copy_dir(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from))
    if (e.is_regular_file() && e.path().extension() != ".f32" && e.path().filename() != "reference.json")
      fs::copy_file(e.path(), to / e.path().filename());
}

// Runs fn, which must throw troupe::error with `code` and a message containing every needle.
inline void expect_error(const std::function<void()>& fn, errc code,
                         std::initializer_list<std::string> needles) {
  try {
    fn();
  } catch (const troupe::error& e) {
    BOOST_TEST_INFO("message: " << e.what());
    BOOST_CHECK_EQUAL(to_string(e.code()), to_string(code));
    for (const auto& n : needles) {
      BOOST_TEST_INFO("message: " << e.what() << "\nmissing: " << n);
      BOOST_CHECK(std::string(e.what()).find(n) != std::string::npos);
    }
    return;
  }
  BOOST_ERROR("no troupe::error thrown; expected " << to_string(code));
}

}  // namespace troupe::test
