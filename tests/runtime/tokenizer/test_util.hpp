// Shared fixtures of the tokenizer tests: the Qwen3 tokenizer (loaded once per binary), the
// reference case files, and temporary model directories for malformed-input tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::test {

inline std::string qwen_dir() { return std::string(TROUPE_SOURCE_DIR) + "/models/qwen3-tokenizer"; }

inline const tokenizer& qwen() {
  static const tokenizer tok(qwen_dir());
  return tok;
}

inline std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<nlohmann::ordered_json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

inline const std::vector<nlohmann::ordered_json>& tokenizer_cases() {
  static const auto cases = read_jsonl(std::string(TROUPE_TEST_DATA_DIR) + "/tokenizer/qwen3_tokenizer_cases.jsonl");
  return cases;
}

// Asserts `fn` throws troupe::error with `code` and a message containing `needle`.
template <class Fn>
void expect_error(Fn&& fn, errc code, const std::string& needle) {
  try {
    fn();
    BOOST_ERROR("no error thrown; expected one containing: " << needle);
  } catch (const troupe::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(code), "error code of: " << e.what());
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, "message: " << e.what());
  }
}

// A fresh directory under the system temp dir, removed with the object.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    static std::mt19937_64 rng{std::random_device{}()};
    path = std::filesystem::temp_directory_path() / ("troupe-tok-" + std::to_string(rng()));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
  std::string str() const { return path.string(); }
};

}  // namespace troupe::test
