// paged_attention (kernels/cpu/ops.cpp, attention.hpp): close to a float64 reference, bit for bit
// the same however a prompt is chunked, and the AVX-512, AVX2 and portable inner loops (and SiLU)
// agree bit for bit.
#define BOOST_TEST_MODULE kernels_cpu_attention
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/kernels.hpp"

namespace tk = troupe::kernels;

namespace {

struct pool {
  int32_t blocks, bs, heads, d;
  std::vector<float> k, v;
  std::vector<int32_t> table;  // a scattered permutation of the blocks
  tk::paged_kv_layer layer() { return {k.data(), v.data(), bs, heads, d}; }
  pool(int32_t blocks_, int32_t bs_, int32_t heads_, int32_t d_, std::mt19937& rng)
      : blocks(blocks_), bs(bs_), heads(heads_), d(d_) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    k.resize(static_cast<size_t>(blocks) * bs * heads * d);
    v.resize(k.size());
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    table.resize(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
  }
  const float* at(const std::vector<float>& base, int64_t pos, int64_t h) const {
    return base.data() + ((static_cast<int64_t>(table[pos / bs]) * bs + pos % bs) * heads + h) * d;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(matches_float64_reference_and_chunking_is_bitwise_invisible) {
  std::mt19937 rng(3);
  // 100 keys: several of paged_attention's key ranges (32 keys for 16-token blocks, 35 for 5), and
  // chunks that run in place (7), gathered (16, 20) or as decode (1).
  for (auto [d, bs] : {std::pair{8, 16}, {40, 5}, {64, 16}, {128, 16}, {128, 5}}) {
    const int32_t kvh = 2, hq = 4, n = 100;
    pool p((n + bs - 1) / bs + 1, bs, kvh, d, rng);
    std::vector<float> q(static_cast<size_t>(n) * hq * d);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : q) x = nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    auto lay = p.layer();
    std::vector<float> whole(q.size()), pieces(q.size());
    tk::paged_attention(q.data(), n, hq, 0, lay, p.table.data(), scale, whole.data());
    double worst = 0;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < hq; ++h) {
        const float* qv = q.data() + (t * hq + h) * d;
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          const float* kr = p.at(p.k, j, h / (hq / kvh));
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(qv[i]) * kr[i];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t i = 0; i < d; ++i) {
          double o = 0;
          for (int64_t j = 0; j <= t; ++j) o += s[j] / sum * p.at(p.v, j, h / (hq / kvh))[i];
          worst = std::max(worst, std::abs(o - whole[(t * hq + h) * d + i]));
        }
      }
    BOOST_TEST(worst < 1e-5, "d " << d << ", bs " << bs << ": worst abs error " << worst);
    for (int chunk : {1, 7, 16, 20}) {
      for (int32_t start = 0; start < n; start += chunk) {
        const int32_t m = std::min(chunk, n - start);
        tk::paged_attention(q.data() + start * hq * d, m, hq, start, lay, p.table.data(), scale,
                            pieces.data() + start * hq * d);
      }
      BOOST_TEST(std::equal(whole.begin(), whole.end(), pieces.begin()), "d " << d << ", bs " << bs << ", chunks of " << chunk);
    }
  }
}

namespace {

bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// The vector back-ends this CPU can run, each with its SiLU.
struct vector_backend {
  const tk::cpu::attn_backend* attn;
  void (*silu)(const float*, const float*, int64_t, float*);
};
std::vector<vector_backend> runnable_backends() {
  std::vector<vector_backend> out;
  if (has_avx512()) out.push_back({&tk::cpu::attn_backend_avx512(), tk::cpu::silu_mul_avx512});
  if (has_avx2()) out.push_back({&tk::cpu::attn_backend_avx2(), tk::cpu::silu_mul_avx2});
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(vector_and_portable_inner_loops_agree_bitwise) {
  const auto backends = runnable_backends();
  if (backends.empty()) BOOST_TEST_MESSAGE("neither AVX-512 nor AVX2 on this CPU: nothing to compare");
  const auto& g = tk::cpu::attn_backend_generic();
  for (const auto& vb : backends) {
    const auto& a = *vb.attn;
    BOOST_TEST_MESSAGE("back-end " << a.name);
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (int32_t d : {8, 12, 16, 40, 64, 100, 128, 256}) {
      for (int32_t bs : {16, 5}) {
        const int32_t heads = 3, nq = 20;
        pool p(40, bs, heads, d, rng);
        std::vector<float> q(static_cast<size_t>(nq) * d);
        for (auto& x : q) x = nd(rng);
        std::vector<const float*> qs(nq);
        std::vector<int64_t> limit(nq);
        int64_t lim = 1 + static_cast<int64_t>(rng() % 9);
        for (int i = 0; i < nq; ++i) {
          qs[i] = q.data() + i * d;
          limit[i] = lim;
          lim += rng() % 3 == 0 ? static_cast<int64_t>(rng() % 20) : 0;  // groups of equal limits
        }
        lim = limit[nq - 1];
        BOOST_REQUIRE(lim <= 40 * bs);
        const tk::cpu::attn_kv kv{p.k.data(), p.v.data(), p.table.data(), bs, heads * d, 1 * d, d};
        const int64_t lds = (lim + 15) / 16 * 16;
        std::vector<float> sa(nq * lds), sg(nq * lds);
        a.scores(qs.data(), limit.data(), nq, kv, 0.1f, sa.data(), lds);
        g.scores(qs.data(), limit.data(), nq, kv, 0.1f, sg.data(), lds);
        bool same = true;
        for (int i = 0; i < nq; ++i)
          same = same && std::equal(sa.begin() + i * lds, sa.begin() + i * lds + limit[i], sg.begin() + i * lds);
        BOOST_TEST(same, a.name << " scores, d " << d << " block " << bs);
        for (int i = 0; i < nq; ++i) {
          a.softmax(sa.data() + i * lds, limit[i]);
          g.softmax(sg.data() + i * lds, limit[i]);
        }
        same = true;
        for (int i = 0; i < nq; ++i)
          same = same && std::equal(sa.begin() + i * lds, sa.begin() + i * lds + limit[i], sg.begin() + i * lds);
        BOOST_TEST(same, a.name << " softmax, d " << d << " block " << bs);
        std::vector<float> oa(nq * d, -1.0f), og(nq * d, -2.0f);
        std::vector<float*> pa(nq), pg(nq);
        for (int i = 0; i < nq; ++i) pa[i] = oa.data() + i * d, pg[i] = og.data() + i * d;
        a.weighted_sum(sg.data(), lds, limit.data(), nq, kv, pa.data(), false);
        g.weighted_sum(sg.data(), lds, limit.data(), nq, kv, pg.data(), false);
        BOOST_TEST(oa == og, a.name << " weighted sum, d " << d << " block " << bs);
        // resume: both continue from the same partial sums, as decode does block by block
        a.weighted_sum(sg.data(), lds, limit.data(), nq, kv, pa.data(), true);
        g.weighted_sum(sg.data(), lds, limit.data(), nq, kv, pg.data(), true);
        BOOST_TEST(oa == og, a.name << " resumed weighted sum, d " << d << " block " << bs);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(silu_mul_is_close_to_float64_and_bitwise_the_same_on_every_backend) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (int64_t count : {1, 7, 8, 15, 16, 17, 100003}) {  // many: a one-rounding slip shows in ~0.3%
    std::vector<float> gate(count), up(count), want(count), got(count);
    for (auto& x : gate) x = nd(rng);
    for (auto& x : up) x = nd(rng);
    gate[0] = count > 1 ? -100.0f : gate[0];  // exp's clamp
    tk::cpu::silu_mul_generic(gate.data(), up.data(), count, want.data());
    double worst = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double g = gate[i], ref = g / (1.0 + std::exp(-g)) * up[i];
      worst = std::max(worst, std::abs(ref - want[i]) / std::max(1.0, std::abs(ref)));
    }
    BOOST_TEST(worst < 1e-6, "count " << count << ": worst relative error " << worst);
    for (const auto& vb : runnable_backends()) {
      std::fill(got.begin(), got.end(), -7.0f);
      vb.silu(gate.data(), up.data(), count, got.data());
      BOOST_TEST(got == want, vb.attn->name << " silu_mul, count " << count);
    }
  }
}
