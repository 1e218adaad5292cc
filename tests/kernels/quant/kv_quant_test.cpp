// The quantized KV pool (INT8 / FP8 codes, one scale per token and head): kv_write's rounding, and
// paged_attention on it equal, bit for bit, to the float attention on the values it stores.
#include <omp.h>

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/kv_quant.hpp"
#include "kernels/kernels.hpp"

namespace tk = troupe::kernels;
using troupe::dtype;

namespace {

struct pools {
  int32_t blocks, bs, heads, d;
  std::vector<uint8_t> kc, vc;
  std::vector<float> ks, vs, kf, vf;
  tk::paged_kv_layer q, f;
  pools(dtype t, int32_t blocks_, int32_t bs_, int32_t heads_, int32_t d_) : blocks(blocks_), bs(bs_), heads(heads_), d(d_) {
    const size_t rows = static_cast<size_t>(blocks) * bs * heads;
    kc.assign(rows * d, 0), vc.assign(rows * d, 0), ks.assign(rows, 0), vs.assign(rows, 0);
    kf.assign(rows * d, 0), vf.assign(rows * d, 0);
    q = {nullptr, nullptr, bs, heads, d};
    q.type = t, q.k_codes = kc.data(), q.v_codes = vc.data(), q.k_scales = ks.data(), q.v_scales = vs.data();
    f = {kf.data(), vf.data(), bs, heads, d};
  }
  // The float pool holding exactly the quantized pool's values, code by code through the scalar
  // conversions (not the kernels' own dequantize_kv_row).
  void mirror() {
    auto value = [this](uint8_t c) {
      return q.type == dtype::i8 ? static_cast<float>(static_cast<int8_t>(c)) : troupe::f8e4m3_to_f32(c);
    };
    for (size_t r = 0; r < ks.size(); ++r)
      for (int32_t e = 0; e < d; ++e) {
        kf[r * d + e] = value(kc[r * d + e]) * ks[r];
        vf[r * d + e] = value(vc[r * d + e]) * vs[r];
      }
  }
};

// Normal random keys and values [len, heads, d] and queries [len, hq, d].
struct qkv {
  std::vector<float> k, v, q;
  qkv(int32_t len, int32_t heads, int32_t hq, int32_t d, uint32_t seed)
      : k(static_cast<size_t>(len) * heads * d), v(k.size()), q(static_cast<size_t>(len) * hq * d) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto* a : {&k, &v, &q})
      for (auto& x : *a) x = nd(rng);
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(kv_rows_round_to_the_nearest_code) {
  std::vector<float> v{0.5f, -1.0f, 0.25f, 0.0f, 0.126f, -0.9999f};
  std::vector<uint8_t> c(v.size());
  const float s = troupe::kernels::cpu::quantize_kv_row(v.data(), 6, dtype::i8, c.data());
  BOOST_TEST(s == 1.0f / 127.0f);
  BOOST_TEST(static_cast<int8_t>(c[1]) == -127);
  BOOST_TEST(static_cast<int8_t>(c[0]) == 64);  // 63.5 -> 64 (ties to even)
  BOOST_TEST(static_cast<int8_t>(c[4]) == 16);  // 16.002
  const float s8 = troupe::kernels::cpu::quantize_kv_row(v.data(), 6, dtype::f8_e4m3, c.data());
  BOOST_TEST(s8 == 1.0f / 448.0f);
  BOOST_TEST(c[1] == 0xfe);  // -448
  std::vector<float> zeros(4, 0.0f);
  BOOST_TEST(troupe::kernels::cpu::quantize_kv_row(zeros.data(), 4, dtype::i8, c.data()) == 0.0f);
  BOOST_TEST(c[0] == 0);
}

BOOST_AUTO_TEST_CASE(quantized_attention_is_float_attention_on_the_stored_values) {
  for (dtype t : {dtype::i8, dtype::f8_e4m3}) {
    pools p(t, 12, 16, 2, 64);
    const int32_t len = 150, hq = 4;
    std::vector<int32_t> table(12);
    std::iota(table.rbegin(), table.rend(), 0);  // reversed: blocks scattered through the pool
    auto [k, v, q] = qkv(len, 2, hq, 64, 3);
    // Write in uneven chunks, as chunked prefill and decode do.
    for (int32_t at = 0; at < len;) {
      const int32_t n = std::min(len - at, 1 + at % 23);
      tk::kv_write(p.q, table.data(), at, n, k.data() + at * 128, v.data() + at * 128);
      at += n;
    }
    p.mirror();
    for (int32_t start : {0, 100, 140, 147, 149}) {  // 150, 50, 10, 3 and 1 queries
      const int32_t nq = len - start;
      std::vector<float> a(static_cast<size_t>(nq) * hq * 64), b(a.size());
      tk::paged_attention(q.data() + start * hq * 64, nq, hq, start, p.q, table.data(), 0.125f, a.data());
      tk::paged_attention(q.data() + start * hq * 64, nq, hq, start, p.f, table.data(), 0.125f, b.data());
      BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, troupe::to_string(t) << " start " << start);
    }
    // The stored values are the rounding of what was written: within half a step of the row scale.
    double worst = 0;
    for (int32_t pos = 0; pos < len; ++pos)
      for (int h = 0; h < 2; ++h) {
        const int64_t row = (static_cast<int64_t>(table[pos / 16]) * 16 + pos % 16) * 2 + h;
        for (int e = 0; e < 64; ++e) {
          const double err = std::fabs(p.kf[row * 64 + e] - k[(pos * 2 + h) * 64 + e]) / (p.ks[row] * (t == dtype::i8 ? 1 : 448));
          worst = std::max(worst, err);
        }
      }
    BOOST_TEST(worst <= (t == dtype::i8 ? 0.5 + 1e-5 : 1.0 / 16 + 1e-5), troupe::to_string(t) << ": worst rounding " << worst);
  }
}

// A decode token reads a quantized pool a block at a time (ops.cpp): every block boundary, items
// of several kv heads (1, 2 or 3 threads over 4 heads), a partial last block, extreme codes
// (signed zero, subnormal and largest E4M3, -127) and a non-finite row, all bit for bit as the
// float attention on the stored values.
BOOST_AUTO_TEST_CASE(decode_on_a_quantized_pool_is_float_decode_on_its_values) {
  const int32_t heads = 4, hq = 8, d = 128, len = 70;
  for (dtype t : {dtype::i8, dtype::f8_e4m3}) {
    pools p(t, 6, 16, heads, d);
    std::vector<int32_t> table{4, 0, 5, 2, 1};
    auto [k, v, q] = qkv(len, heads, hq, d, 11);
    k[(33 * heads + 2) * d + 5] = INFINITY;  // position 33, head 2: codes 0, scale NaN
    for (int32_t at = 0; at < len; ++at) tk::kv_write(p.q, table.data(), at, 1, k.data() + at * heads * d, v.data() + at * heads * d);
    // Extreme codes in position 20's rows (slot 4 of block table[1] = 0).
    const uint8_t special[] = {0x80, 0x01, 0x81, 0x07, 0x7e, 0xfe};
    for (size_t i = 0; i < std::size(special); ++i) {
      const size_t at = ((0 * 16 + 4) * heads + i % heads) * d + i;
      p.kc[at] = t == dtype::i8 ? static_cast<uint8_t>(int8_t{-127}) : special[i];
      p.vc[at + 7] = t == dtype::i8 ? uint8_t{127} : special[i];
    }
    p.mirror();
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      for (int32_t start : {0, 1, 15, 16, 17, 20, 31, 32, 47, 48, 69}) {
        std::vector<float> a(static_cast<size_t>(hq) * d), b(a.size());
        tk::paged_attention(q.data() + start * hq * d, 1, hq, start, p.q, table.data(), 0.0883883f, a.data());
        tk::paged_attention(q.data() + start * hq * d, 1, hq, start, p.f, table.data(), 0.0883883f, b.data());
        BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0,
                   troupe::to_string(t) << ", " << threads << " threads, position " << start);
        // Only heads 4-5 (kv head 2) see the non-finite row, from position 33 on.
        bool finite = true;
        for (int64_t i = 0; i < 4 * d; ++i) finite = finite && std::isfinite(a[i]);
        BOOST_TEST(finite, troupe::to_string(t) << " position " << start << ": heads 0-3 must stay finite");
        BOOST_TEST(std::isnan(a[4 * d]) == (start >= 33), troupe::to_string(t) << " position " << start);
      }
    }
    omp_set_num_threads(omp_get_num_procs());
  }
}

BOOST_AUTO_TEST_CASE(fp8_codes_decode_by_their_bits_as_the_reference_does) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float got = troupe::kernels::cpu::f8e4m3_bits_to_f32(c), want = troupe::f8e4m3_to_f32(static_cast<uint8_t>(c));
    BOOST_TEST(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(want), "code " << c << ": " << got << " vs " << want);
  }
}

BOOST_AUTO_TEST_CASE(fp8_rows_by_f16c_are_the_portable_rows_bit_for_bit) {
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))) {
    BOOST_TEST_MESSAGE("no AVX2 + F16C on this CPU: nothing to compare");
    return;
  }
  // Every code (NaN ones too) in every lane and in the scalar tail, at scales from subnormal up.
  std::vector<uint8_t> codes(256 + 16 + 7);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 37 + i / 256);
  for (float scale : {1.0f, 0.013f, 3.7e-39f, 6.1e5f, 0.0f}) {
    for (int64_t n : {int64_t{256}, int64_t{256 + 16 + 7}, int64_t{9}, int64_t{0}}) {
      std::vector<float> want(static_cast<size_t>(n)), got(want.size());
      troupe::kernels::cpu::dequantize_kv_row(codes.data(), scale, n, dtype::f8_e4m3, want.data());
      troupe::kernels::cpu::dequantize_fp8_avx2(codes.data(), scale, n, got.data());
      BOOST_TEST(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0, "scale " << scale << ", n " << n);
    }
  }
}

// Every code of both types, as values (V of kv head 0, NaN codes included) and as keys (K of kv
// head 1, the NaN codes left out so that head's scores stay finite), in a decode step and in a
// prompt chunk: the same bits as the float attention on the reference dequantisation.
BOOST_AUTO_TEST_CASE(every_code_reads_as_the_reference_dequantisation) {
  const int32_t heads = 2, hq = 4, d = 128, len = 3;
  for (dtype t : {dtype::i8, dtype::f8_e4m3}) {
    pools p(t, 1, 16, heads, d);
    auto [k, v, q] = qkv(len, heads, hq, d, 5);
    const std::vector<int32_t> table{0};
    tk::kv_write(p.q, table.data(), 0, len, k.data(), v.data());
    for (int c = 0; c < 256; ++c) {
      const size_t pos = static_cast<size_t>(c) / d, e = static_cast<size_t>(c) % d;
      p.vc[(pos * heads + 0) * d + e] = static_cast<uint8_t>(c);
      const bool nan_code = t == dtype::f8_e4m3 && (c & 0x7f) == 0x7f;
      p.kc[(pos * heads + 1) * d + e] = nan_code ? uint8_t{0} : static_cast<uint8_t>(c);
    }
    p.mirror();
    for (int32_t start : {2, 0}) {  // decode at position 2; a prompt chunk of all three
      const int32_t nq = len - start;
      std::vector<float> a(static_cast<size_t>(nq) * hq * d), b(a.size());
      tk::paged_attention(q.data() + start * hq * d, nq, hq, start, p.q, table.data(), 0.0883883f, a.data());
      tk::paged_attention(q.data() + start * hq * d, nq, hq, start, p.f, table.data(), 0.0883883f, b.data());
      BOOST_TEST(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0, troupe::to_string(t) << " start " << start);
      // Kv head 1 (query heads 2, 3) read every finite key code and stayed finite.
      bool finite = true;
      for (int32_t r = 0; r < nq; ++r)
        for (int64_t i = 2 * d; i < 4 * d; ++i) finite = finite && std::isfinite(a[r * hq * d + i]);
      BOOST_TEST(finite, troupe::to_string(t) << " start " << start);
    }
  }
}
