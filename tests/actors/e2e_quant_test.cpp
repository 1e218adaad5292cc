// End to end: `troupe serve` with quantized weights (model.quantization) and a quantized KV pool
// (kv_cache.kv_cache_dtype). Concurrent requests get exactly the tokens the generator gives the
// same quantized model and KV type alone (what `troupe generate --quantization ... --kv-cache-dtype
// ...` prints), also when the prefix cache hands them quantized blocks; the banner says what runs.
// GPTQ and AWQ checkpoints serve as they are stored. The bf16 compute mode, whose bits depend on the
// CPU (AMX tiles or vdpbf16ps), serves what the generator gives in that mode.
#include "tests/actors/e2e_fixture.hpp"
#include "runtime/quant/load.hpp"

using namespace troupe;
using namespace troupe::e2e;

namespace {

std::vector<int32_t> quantized_reference(const checkpoint& ck, dtype kv, const wire::generate_request& r,
                                         kernels::compute_dtype compute = kernels::compute_dtype::f32) {
  generate_options o;
  o.compute = compute;
  o.max_tokens = *r.max_tokens;
  o.sampling = defaults_from(ck.generation);
  o.sampling.temperature = 0;
  o.sampling.ignore_eos = true;
  o.kv_cache_dtype = kv;
  generator g(ck);
  return g.generate(r.prompt_ids, o).ids;
}

void check_served_equals_alone(const char* quantization, const char* kv_name, dtype kv,
                                const std::string& model = tiny_dense_dir, const std::string& weights_line = "") {
  auto c = test_config();
  c.quantization = quantization;
  c.kv_cache_dtype = kv_name;
  auto srv = start(c, model);
  if (!weights_line.empty()) BOOST_TEST(srv->banner().find(weights_line) != std::string::npos, srv->banner());
  BOOST_TEST(srv->banner().find(" tokens (" + std::string(kv_cache::kv_dtype_name(kv)) + ", ") !=
                 std::string::npos,
             srv->banner());
  quant::load_options lo;
  lo.quantization = quant::parse_method(quantization, "test");
  auto ck = quant::load_model(model, lo);

  std::mt19937 rng(11);
  std::vector<int32_t> shared(40);  // two and a half blocks of 16
  for (auto& t : shared) t = static_cast<int32_t>(rng() % 4000);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 6; ++i) {
    auto p = shared;  // a shared prefix, so later requests reuse earlier ones' quantized blocks
    auto tail = random_prompt(rng, 20);
    p.insert(p.end(), tail.begin(), tail.end());
    reqs.push_back(ids_request(std::string(quantization) + kv_name + std::to_string(i), p, 12));
  }
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    BOOST_TEST(got[i] == quantized_reference(*ck, kv, reqs[i]), boost::test_tools::per_element());
  // Again, one at a time: now every prompt's shared blocks come from the prefix cache.
  const int64_t cached =
      complete_again(cl, reqs, [&](const wire::generate_request& r) { return quantized_reference(*ck, kv, r); });
  BOOST_TEST(cached > 0);
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_quant)

// The bf16 compute mode (on this CPU's AMX tiles, vdpbf16ps, or the portable emulation) serves the
// tokens the generator gives in the same mode, and the banner says which arithmetic runs.
BOOST_AUTO_TEST_CASE(bf16_compute_serves_what_the_generator_gives) {
  auto c = test_config();
  c.compute_dtype = "bf16";
  auto srv = start(c, tiny_dense_dir);
  BOOST_TEST(srv->banner().find("  compute: bf16 activations for BF16 weights (--compute-dtype bf16), on ") !=
                 std::string::npos,
             srv->banner());
  auto ck = load_checkpoint(tiny_dense_dir);
  std::mt19937 rng(17);
  std::vector<wire::generate_request> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(ids_request("bf16-" + std::to_string(i), random_prompt(rng, 30 + 7 * i), 12));
  client::client cl("127.0.0.1", srv->port());
  const auto got = stream_all(cl, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto want = quantized_reference(*ck, dtype::f32, reqs[i], kernels::compute_dtype::bf16);
    BOOST_TEST(got[i] == want, boost::test_tools::per_element());
  }
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(int8_weights_and_int8_kv_serve_what_the_generator_gives) {
  check_served_equals_alone("int8", "int8", dtype::i8);
}

BOOST_AUTO_TEST_CASE(fp8_weights_and_fp8_kv_serve_what_the_generator_gives) {
  check_served_equals_alone("fp8", "fp8", dtype::f8_e4m3);
}

// Packed checkpoints load as stored (INT8 codes from GPTQ's 8-bit words, 4-bit u4 codes from AWQ's)
// and serve like any.
BOOST_AUTO_TEST_CASE(gptq_and_awq_checkpoints_serve_what_the_generator_gives) {
  check_served_equals_alone("none", "int8", dtype::i8, TROUPE_TEST_DATA_DIR "/gptq/tiny-dense-gptq8",
                            "weights: int8 (stored as GPTQ 8-bit), ");
  check_served_equals_alone("none", "fp8", dtype::f8_e4m3, TROUPE_TEST_DATA_DIR "/awq/tiny-dense-awq",
                            "weights: int4 (stored as AWQ 4-bit), ");
}

BOOST_AUTO_TEST_CASE(float_weights_with_an_int8_kv_pool_hold_more_blocks) {
  auto c = test_config();
  c.num_kv_blocks = 0;
  c.kv_cache_memory_bytes = 8 << 20;
  auto f32 = start(c);
  c.kv_cache_dtype = "int8";
  auto i8 = start(c);
  // Same budget: float32 K/V per (token, head) row is head_dim x 4 bytes, INT8 head_dim + 4.
  const auto& mc = tiny_dense().config;
  const double ratio = double(mc.head_dim * 4) / double(mc.head_dim + 4);
  BOOST_TEST(i8->num_kv_blocks() >= static_cast<int32_t>(f32->num_kv_blocks() * ratio * 0.99));
}

BOOST_AUTO_TEST_SUITE_END()
