// Reads a golden set (tests/data/golden/<name>): reference.json and its float32 logits files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "runtime/model/checkpoint.hpp"

namespace troupe::testing {

struct golden_rows {
  std::vector<int64_t> index;  // positions (prompt) or steps (decode)
  std::vector<float> data;     // [index.size(), vocab]
};

struct golden_case {
  std::string id;
  std::vector<int32_t> prompt;
  golden_rows prompt_logits;
  std::vector<int32_t> greedy;
  golden_rows decode_logits;  // may be empty
  std::vector<double> greedy_margin;
};

inline std::string golden_dir(const std::string& name) { return std::string(TROUPE_TEST_DATA_DIR) + "/golden/" + name; }

// The sets every float engine path is checked on. The -yarn and -linear sets are tiny-dense with
// RoPE scaling, their references from transformers itself (tools/reference/rope_scaling_golden.py).
inline const char* const kGoldenSets[] = {"tiny-dense",     "tiny-untied-sharded", "tiny-moe",
                                          "e2e-full-vocab", "tiny-dense-yarn",     "tiny-dense-linear"};

// A set's checkpoint, loaded once per test binary.
inline std::shared_ptr<checkpoint> golden_checkpoint(const std::string& name) {
  static std::map<std::string, std::shared_ptr<checkpoint>> cache;
  auto& c = cache[name];
  if (!c) c = load_checkpoint(golden_dir(name));
  return c;
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline std::vector<golden_case> load_golden(const std::string& name) {
  const std::string dir = golden_dir(name);
  std::ifstream in(dir + "/reference.json");
  auto ref = nlohmann::json::parse(in);
  std::vector<golden_case> cases;
  for (const auto& c : ref.at("cases")) {
    golden_case g;
    g.id = c.at("id").get<std::string>();
    g.prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    const auto& pl = c.at("prompt_logits");
    g.prompt_logits.index = pl.at("positions").get<std::vector<int64_t>>();
    g.prompt_logits.data = read_f32(dir + "/" + pl.at("file").get<std::string>());
    const auto& gr = c.at("greedy");
    g.greedy = gr.at("ids").get<std::vector<int32_t>>();
    g.greedy_margin = gr.at("top2_margin").get<std::vector<double>>();
    if (gr.contains("logits") && !gr.at("logits").is_null()) {
      g.decode_logits.index = gr.at("logits").at("steps").get<std::vector<int64_t>>();
      g.decode_logits.data = read_f32(dir + "/" + gr.at("logits").at("file").get<std::string>());
    }
    cases.push_back(std::move(g));
  }
  return cases;
}

// max|engine - ref| / max(1, max|ref|) over one row.
inline double row_error(const float* engine, const float* ref, int64_t vocab) {
  double max_diff = 0, max_ref = 1;
  for (int64_t i = 0; i < vocab; ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(engine[i]) - ref[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
  }
  return max_diff / max_ref;
}

// A prompt's logits ([prompt, vocab]) against the case's reference rows: each within `tolerance`
// (a failure names `what`, the case and the position). Returns the largest error.
inline double check_prompt_logits(const std::vector<float>& logits, const golden_case& c, int64_t vocab,
                                  double tolerance, const std::string& what) {
  BOOST_REQUIRE_EQUAL(logits.size(), c.prompt.size() * static_cast<size_t>(vocab));
  double worst = 0;
  for (size_t r = 0; r < c.prompt_logits.index.size(); ++r) {
    const int64_t pos = c.prompt_logits.index[r];
    const double err = row_error(logits.data() + pos * vocab, c.prompt_logits.data.data() + r * vocab, vocab);
    worst = std::max(worst, err);
    BOOST_TEST(err <= tolerance, what << " " << c.id << " position " << pos << ": relative error " << err);
  }
  return worst;
}

}  // namespace troupe::testing
