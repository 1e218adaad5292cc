// Helpers of the tests that break a quantized checkpoint on purpose: copy it, edit its config.json
// or its tensors, and check the error that loading it then gives.
#pragma once

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"

namespace troupe::testing {

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

inline void write_json(const std::filesystem::path& p, const nlohmann::json& j) {
  std::ofstream out(p);
  out << j.dump(2);
}

// A copy of a checkpoint directory (files only) that a test then breaks.
inline void copy_dir(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::create_directories(to);
  for (const auto& e : std::filesystem::directory_iterator(from))
    std::filesystem::copy_file(e.path(), to / e.path().filename());
}

using tensor_list = std::vector<tensor_to_write>;
using tensor_bytes = std::vector<std::vector<uint8_t>>;

// Rewrites model.safetensors of `dir` after `edit` changes its tensor list. Every tensor's bytes are
// copied into `keep` first, so an edit may change them in place; new tensors' bytes go there too.
inline void edit_tensors(const std::filesystem::path& dir, const std::function<void(tensor_list&, tensor_bytes&)>& edit) {
  tensor_bytes keep;
  tensor_list ts;
  {
    safetensors_file in((dir / "model.safetensors").string());
    keep.reserve(in.tensors().size() + 8);  // edits add a few: pointers into it must stay valid
    for (const auto& t : in.tensors()) {
      keep.emplace_back(t.data, t.data + t.bytes());
      ts.push_back({t.name, t.type, t.shape, keep.back().data(), {}});
    }
  }
  edit(ts, keep);
  write_safetensors((dir / "model.safetensors").string(), ts);
}

inline tensor_to_write& find_tensor(tensor_list& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

// f() must throw troupe::error with `code` and every needle in its message.
template <class F>
void expect_error(F&& f, errc code, const std::vector<std::string>& needles) {
  try {
    f();
    BOOST_ERROR("expected an error containing '" << needles.front() << "'");
  } catch (const troupe::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(code), e.what());
    for (const auto& n : needles)
      BOOST_TEST(std::string(e.what()).find(n) != std::string::npos, "'" << n << "' not in: " << e.what());
  }
}

}  // namespace troupe::testing
