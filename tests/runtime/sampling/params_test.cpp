// defaults_from and validate: every out-of-range field is rejected with its name in the message.
#define BOOST_TEST_MODULE sampling
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/sampling/sampler.hpp"

using troupe::errc;
using troupe::sampling_params;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// validate(p) must throw invalid_argument whose message names `field`.
void expect_rejected(const sampling_params& p, const std::string& field) {
  try {
    troupe::validate(p);
    BOOST_ERROR("validate accepted a bad " << field);
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == errc::invalid_argument));
    const std::string msg = e.what();
    BOOST_TEST(msg.find(field) != std::string::npos, "message: " << msg);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(params)

BOOST_AUTO_TEST_CASE(defaults_from_greedy_when_do_sample_is_false) {
  troupe::generation_defaults g;
  g.do_sample = false;
  g.temperature = 0.7f;
  g.top_p = 0.8f;
  g.top_k = 20;
  g.min_p = 0.05f;
  g.repetition_penalty = 1.05f;
  g.eos_token_ids = {151645, 151643};
  const sampling_params p = troupe::defaults_from(g);
  BOOST_TEST(p.temperature == 0.0f);
  // The other knobs are still the checkpoint's (vLLM copies them regardless of do_sample).
  BOOST_TEST(p.top_p == 0.8f);
  BOOST_TEST(p.top_k == 20);
  BOOST_TEST(p.min_p == 0.05f);
  BOOST_TEST(p.repetition_penalty == 1.05f);
  BOOST_TEST(p.presence_penalty == 0.0f);
  BOOST_TEST(p.frequency_penalty == 0.0f);
  BOOST_TEST(p.stop_token_ids == (std::vector<int32_t>{151645, 151643}));
  BOOST_TEST(!p.has_seed);
  BOOST_TEST(!p.ignore_eos);
}

BOOST_AUTO_TEST_CASE(defaults_from_sampling_takes_the_config_values) {
  // Qwen3's generation_config.json.
  troupe::generation_defaults g;
  g.do_sample = true;
  g.temperature = 0.6f;
  g.top_p = 0.95f;
  g.top_k = 20;
  g.eos_token_ids = {151645, 151643};
  const sampling_params p = troupe::defaults_from(g);
  BOOST_TEST(p.temperature == 0.6f);
  BOOST_TEST(p.top_p == 0.95f);
  BOOST_TEST(p.top_k == 20);
  BOOST_TEST(p.min_p == 0.0f);
  BOOST_TEST(p.repetition_penalty == 1.0f);
  BOOST_TEST(p.stop_token_ids == (std::vector<int32_t>{151645, 151643}));
  BOOST_CHECK_NO_THROW(troupe::validate(p));
}

BOOST_AUTO_TEST_CASE(validate_accepts_every_boundary_value) {
  sampling_params p;
  BOOST_CHECK_NO_THROW(troupe::validate(p));  // the defaults
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 0.0f;
  p.repetition_penalty = 1e-3f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.stop_token_ids = {0};
  BOOST_CHECK_NO_THROW(troupe::validate(p));
  p.top_k = 0;
  p.min_p = 1.0f;
  p.top_p = 1e-6f;
  p.presence_penalty = 2.0f;
  p.frequency_penalty = -2.0f;
  p.temperature = 100.0f;
  BOOST_CHECK_NO_THROW(troupe::validate(p));
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_temperature) {
  for (float v : {-0.1f, -kInf, kInf, kNan}) {
    sampling_params p;
    p.temperature = v;
    expect_rejected(p, "temperature");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_top_p) {
  for (float v : {0.0f, -0.5f, 1.0001f, kInf, kNan}) {
    sampling_params p;
    p.top_p = v;
    expect_rejected(p, "top_p");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_top_k) {
  for (int32_t v : {-2, -100, std::numeric_limits<int32_t>::min()}) {
    sampling_params p;
    p.top_k = v;
    expect_rejected(p, "top_k");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_min_p) {
  for (float v : {-0.01f, 1.01f, kInf, -kInf, kNan}) {
    sampling_params p;
    p.min_p = v;
    expect_rejected(p, "min_p");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_repetition_penalty) {
  for (float v : {0.0f, -1.0f, kInf, kNan}) {
    sampling_params p;
    p.repetition_penalty = v;
    expect_rejected(p, "repetition_penalty");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_presence_penalty) {
  for (float v : {-2.01f, 2.01f, kInf, kNan}) {
    sampling_params p;
    p.presence_penalty = v;
    expect_rejected(p, "presence_penalty");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_bad_frequency_penalty) {
  for (float v : {-2.01f, 2.01f, -kInf, kNan}) {
    sampling_params p;
    p.frequency_penalty = v;
    expect_rejected(p, "frequency_penalty");
  }
}

BOOST_AUTO_TEST_CASE(validate_rejects_negative_stop_token_id) {
  sampling_params p;
  p.stop_token_ids = {5, -1};
  expect_rejected(p, "stop_token_ids[1]");
}

BOOST_AUTO_TEST_CASE(message_states_the_value_and_the_range) {
  sampling_params p;
  p.top_p = 1.5f;
  try {
    troupe::validate(p);
    BOOST_ERROR("accepted top_p = 1.5");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()) ==
               "sampling parameter top_p = 1.5 is out of range: expected a value in (0, 1] "
               "(1 = off)");
  }
}

BOOST_AUTO_TEST_CASE(sampler_constructor_validates) {
  sampling_params p;
  p.min_p = kNan;
  try {
    troupe::sampler s(p);
    BOOST_ERROR("sampler accepted min_p = nan");
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == errc::invalid_argument));
    BOOST_TEST(std::string(e.what()).find("min_p = nan") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
