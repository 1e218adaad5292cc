// `troupe quantize` as a user runs it: a float checkpoint quantized and written, GPTQ and AWQ ones
// rewritten in Troupe's INT8 layout (generating the same ids as the packed model), and a GPTQ model
// refused for FP8 with one clear message.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/runtime/engine/golden.hpp"
#include "tests/tools/troupe/run_troupe.hpp"

namespace fs = std::filesystem;

namespace {

troupe::testing::run_result troupe_cli(const std::string& args) { return troupe::testing::run_troupe(args); }

struct scratch_dir {
  fs::path path = fs::temp_directory_path() / ("troupe_cli_quantize_" + std::to_string(::getpid()));
  scratch_dir() { fs::create_directories(path); }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// "gptq/tiny-dense-gptq8" -> its directory.
std::string data_dir(const std::string& set) { return std::string(TROUPE_TEST_DATA_DIR) + "/" + set; }

std::vector<int32_t> greedy_ids(const std::string& model) {
  const auto r = troupe_cli("generate --model " + model + " --ids 5,17,300,4000 --max-tokens 10 --temperature 0 --ignore-eos --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  return nlohmann::json::parse(r.output).at("ids").get<std::vector<int32_t>>();
}

}  // namespace

BOOST_AUTO_TEST_CASE(quantize_rewrites_gptq_and_awq_models_as_troupe_int8) {
  scratch_dir dir;
  int k = 0;
  for (const std::string set : {"gptq/tiny-dense-gptq8", "gptq/tiny-dense-gptq4", "awq/tiny-dense-awq"}) {
    const std::string out = (dir.path / std::to_string(k++)).string();
    const auto r = troupe_cli("quantize --model " + data_dir(set) + " --out " + out + " --method int8");
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
    BOOST_TEST(r.output.find("14 tensors quantized") != std::string::npos, r.output);
    const auto ids = greedy_ids(data_dir(set));
    BOOST_TEST(ids.size() == 10u);
    BOOST_TEST(greedy_ids(out) == ids, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(quantize_still_quantizes_float_checkpoints) {
  scratch_dir dir;
  const std::string out = (dir.path / "int8").string();
  const auto r = troupe_cli("quantize --model " + troupe::testing::golden_dir("tiny-dense") + " --out " + out + " --method int8");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.find("int8, 15 tensors quantized") != std::string::npos, r.output);  // lm_head too
}

BOOST_AUTO_TEST_CASE(quantize_refuses_fp8_of_a_gptq_model) {
  scratch_dir dir;
  const auto r = troupe_cli("quantize --model " + data_dir("gptq/tiny-dense-gptq8") + " --out " + (dir.path / "fp8").string() +
                            " --method fp8");
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(r.output.find("already quantized (int8)") != std::string::npos, r.output);
  BOOST_TEST(!fs::exists(dir.path / "fp8"));
}
