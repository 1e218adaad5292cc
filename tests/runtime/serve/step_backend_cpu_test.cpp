// The CPU step backend over pipeline stages: a block's K/V as prefix caching stores it is the
// stages' layers one after another, so it equals, byte for byte, the payload of the backend without
// stages (the shared cache's entries serve either layout); a payload loaded into the stages' pools
// continues the sequence with the bits of the backend that computed it; a payload of the wrong
// size is refused before any stage's pool is written.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <numeric>

#include "runtime/core/error.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/prefix/kv_block_io.hpp"
#include "runtime/serve/step_backend.hpp"

using namespace troupe;

namespace {

std::shared_ptr<const checkpoint> untied_sharded() {  // 3 layers
  static std::shared_ptr<const checkpoint> ck = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-untied-sharded");
  return ck;
}

parallel_config layout(int32_t pp, int32_t tp = 1) {
  parallel_config p{tp};
  p.pipeline_size = pp;
  return p;
}

// 40 tokens (blocks 0..2) prefilled, and the payloads of its two full blocks.
std::string prefill_and_save(serve::step_backend& b, const std::vector<int32_t>& prompt) {
  const std::vector<int32_t> table{0, 1, 2};
  step_sequence sq{0, prompt, 0, table, logits_mode::last};
  step_result r;
  b.step(std::span<const step_sequence>(&sq, 1), r);
  std::string out;
  b.save_block(0, out);
  b.save_block(1, out);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(step_backend_cpu)

BOOST_AUTO_TEST_CASE(pipeline_stages_store_and_load_blocks_as_one_pool_does) {
  auto ck = untied_sharded();
  BOOST_REQUIRE_EQUAL(ck->config.num_hidden_layers, 3);
  std::vector<int32_t> prompt(40);
  std::iota(prompt.begin(), prompt.end(), 100);
  auto one = serve::make_cpu_backend(ck, 8, 16);
  const std::string whole = prefill_and_save(*one, prompt);
  BOOST_TEST(whole.size() == 2 * prefix::layout_for(ck->config, 16).payload_bytes());
  for (const parallel_config& p : {layout(2), layout(3), layout(2, 2)}) {
    auto piped = serve::make_cpu_backend(ck, 8, 16, dtype::f32, {}, {}, p);
    BOOST_TEST((piped->kv_layout() == one->kv_layout()));
    const std::string got = prefill_and_save(*piped, prompt);
    // Tensor parallelism adds partial sums in another order (K/V differ in the last bits); stages alone do not.
    if (p.size == 1) BOOST_TEST((got == whole), p.pipeline_size << " stages store other bytes");
    BOOST_TEST(got.size() == whole.size());
  }

  // The first 32 positions loaded into fresh stages from the one-pool payload, then the rest of
  // the prompt and a decode step: the one-pool backend's logits, bit for bit.
  auto fresh = serve::make_cpu_backend(ck, 8, 16, dtype::f32, {}, {}, layout(3));
  const size_t block = whole.size() / 2;
  fresh->load_block(4, std::string_view(whole).substr(0, block));
  fresh->load_block(5, std::string_view(whole).substr(block));
  const std::vector<int32_t> t_fresh{4, 5, 6}, t_one{0, 1, 2};
  const std::vector<int32_t> rest(prompt.begin() + 32, prompt.end());
  step_result a, b;
  step_sequence sa{0, rest, 32, t_fresh, logits_mode::all}, sb{0, rest, 32, t_one, logits_mode::all};
  fresh->step(std::span<const step_sequence>(&sa, 1), a);
  one->step(std::span<const step_sequence>(&sb, 1), b);
  BOOST_REQUIRE_EQUAL(a.logits.size(), b.logits.size());
  BOOST_TEST(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0);

  // A payload one byte short: refused naming the sizes, and no stage's pool changes.
  std::string before;
  fresh->save_block(4, before);
  try {
    fresh->load_block(4, std::string_view(whole).substr(block + 1));
    BOOST_FAIL("a short payload was taken");
  } catch (const error& e) {
    BOOST_TEST(std::string(e.what()).find("bytes; a block of this pool has") != std::string::npos, e.what());
  }
  std::string after;
  fresh->save_block(4, after);
  BOOST_TEST((after == before));
}

BOOST_AUTO_TEST_SUITE_END()
