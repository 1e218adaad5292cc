// RoPE frequencies and YaRN's attention factor against transformers' own ROPE_INIT_FUNCTIONS
// (tests/data/rope/hf_rope_frequencies.json, written by tools/reference/rope_scaling_golden.py):
// Qwen3's published YaRN setting and a variant of every YaRN field.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "runtime/model/config.hpp"
#include "runtime/model/rope.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using json = nlohmann::json;

BOOST_AUTO_TEST_SUITE(rope)

BOOST_AUTO_TEST_CASE(frequencies_match_transformers) {
  const json ref = json::parse(test::read_file(std::string(TROUPE_TEST_DATA_DIR) + "/rope/hf_rope_frequencies.json"));
  BOOST_REQUIRE_GE(ref.at("cases").size(), 9u);
  for (const auto& c : ref.at("cases")) {
    const std::string name = c.at("name");
    const model_config cfg = parse_model_config(c.at("config").dump(), name);
    const rope_frequencies got = rope_frequencies_of(cfg);
    const auto want = c.at("inv_freq").get<std::vector<double>>();
    BOOST_REQUIRE_EQUAL(got.inv_freq.size(), want.size());
    // transformers computes in float32, Troupe in double rounded once: a few float32 ulps apart.
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::abs(got.inv_freq[i] - want[i]) / want[i]);
    BOOST_TEST(worst < 1e-6, name << ": inv_freq differs by " << worst << " relative");
    BOOST_TEST(std::abs(got.attention_factor - c.at("attention_factor").get<double>()) < 1e-6,
               name << ": attention factor " << got.attention_factor << ", transformers "
                    << c.at("attention_factor").get<double>());
  }
}

// YaRN keeps the fastest pairs (many turns within the pretraining context) and divides the slowest
// by the factor: a wrong ramp direction would swap the two ends.
BOOST_AUTO_TEST_CASE(yarn_keeps_fast_pairs_and_interpolates_slow_ones) {
  model_config c;
  c.head_dim = 128;
  c.rope_theta = 1e6;
  c.max_position_embeddings = 40960;
  const rope_frequencies plain = rope_frequencies_of(c);
  c.rope.type = rope_scaling_type::yarn;
  c.rope.factor = 4.0;
  c.rope.original_max_position_embeddings = 32768;
  c.rope.attention_factor = 1.1;
  const rope_frequencies yarn = rope_frequencies_of(c);
  BOOST_TEST(yarn.inv_freq.front() == plain.inv_freq.front());
  BOOST_TEST(std::abs(yarn.inv_freq.back() - plain.inv_freq.back() / 4) < 1e-6 * plain.inv_freq.back());
  BOOST_TEST(yarn.attention_factor == 1.1f);
  BOOST_TEST(plain.attention_factor == 1.0f);
}

BOOST_AUTO_TEST_SUITE_END()
