// The engine on F32 and F16 weights: the BF16 golden checkpoint rewritten in each dtype (exact
// for F32; F16 holds these values to ~1e-7) must still match the float64 reference logits.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <unistd.h>

#include "runtime/engine/generator.hpp"
#include "runtime/model/safetensors.hpp"
#include "tests/runtime/engine/golden.hpp"

namespace fs = std::filesystem;
using namespace troupe;

namespace {

fs::path rewrite_in(dtype target, const std::string& set) {
  const fs::path src = testing::golden_dir(set);
  const fs::path dst = fs::temp_directory_path() /
                       ("troupe_dtype_" + std::string(to_string(target)) + "_" + std::to_string(getpid()));
  fs::create_directories(dst);
  for (const char* f : {"config.json", "generation_config.json"}) fs::copy_file(src / f, dst / f, fs::copy_options::overwrite_existing);
  safetensors_file in((src / "model.safetensors").string());
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<tensor_to_write> out;
  for (const auto& t : in.tensors()) {
    BOOST_REQUIRE(t.type == dtype::bf16);
    const auto* s = reinterpret_cast<const uint16_t*>(t.data);
    std::vector<uint8_t> b(static_cast<size_t>(t.numel()) * dtype_size(target));
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float v = bf16_to_f32(s[i]);
      if (target == dtype::f32) {
        std::memcpy(b.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = f32_to_f16(v);
        std::memcpy(b.data() + 2 * i, &h, 2);
      }
    }
    buffers.push_back(std::move(b));
    out.push_back({t.name, target, t.shape, buffers.back().data(), {}});
  }
  write_safetensors((dst / "model.safetensors").string(), out);
  return dst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(f32_and_f16_weights_match_the_reference) {
  const auto cases = testing::load_golden("tiny-dense");
  for (dtype t : {dtype::f32, dtype::f16}) {
    const fs::path dir = rewrite_in(t, "tiny-dense");
    auto ck = load_checkpoint(dir.string());
    BOOST_TEST(to_string(ck->weights.layers[0].q_proj.type) == to_string(t));
    generator gen(*ck);
    for (const auto& c : cases) {
      auto logits = gen.prompt_logits(c.prompt);
      for (size_t r = 0; r < c.prompt_logits.index.size(); ++r) {
        const int64_t pos = c.prompt_logits.index[r];
        const double err = testing::row_error(logits.data() + pos * 4096, c.prompt_logits.data.data() + r * 4096, 4096);
        BOOST_TEST(err <= 1e-4, to_string(t) << " " << c.id << " position " << pos << ": " << err);
      }
    }
    fs::remove_all(dir);
  }
}
