// The CUDA forward step v0 (runtime/engine/cuda) against the float64 golden references and the CPU
// engine: prompt logits, greedy continuations, incremental decode and chunked prefill vs one step,
// a mixed batch vs each sequence alone, and FP8 weights (W8A8 on the device) vs the CPU engine on
// the same FP8 model. Device cases exit 77 when there is no device (ctest: skipped); the MoE refusal
// and the batch checks run on any machine. The golden data: device_test.hpp.
#define BOOST_TEST_MODULE troupe_engine_cuda
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "tests/runtime/engine/cuda/device_test.hpp"  // before golden.hpp: TROUPE_TEST_DATA_DIR
#include "kernels/cuda/device.hpp"
#include "runtime/core/error.hpp"
#include "runtime/engine/cuda/cuda_model_runner.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/quant/load.hpp"
#include "tests/runtime/engine/cached_decode.hpp"
#include "tests/runtime/engine/expect_error.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// The CPU engine's tolerance (tests/data/README.md: ~40x the float32 noise) times 2: the device
// computes the same float32 operations in another order (cuBLAS sgemm blocking, pedantic: no TF32;
// expf instead of the CPU's exp polynomial; another softmax order), which is float32 noise of the
// same size, not more. Every typical mistake (a wrong position, head, block, norm) is >= 1e-2.
constexpr double kTolerance = 2e-4;

const char* kDenseSets[] = {"tiny-dense", "tiny-untied-sharded", "e2e-full-vocab", "tiny-dense-yarn"};
// The sets with the four prompts mixed_batch_equals_each_alone picks from (tiny-dense-yarn has two).
const char* kMixedSets[] = {"tiny-dense", "tiny-untied-sharded", "e2e-full-vocab"};

int device_sm() {
  const std::string d = kernels::cuda::describe_device(0);
  const auto p = d.find("(sm_");
  return p == std::string::npos ? 0 : std::atoi(d.c_str() + p + 4);
}

std::shared_ptr<checkpoint> load(const std::string& name) {
  static std::map<std::string, std::shared_ptr<checkpoint>> cache;
  auto& c = cache[name];
  if (!c) c = load_checkpoint(golden_dir(name));
  return c;
}

std::vector<int32_t> iota_table(int32_t n, int32_t offset = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), offset);
  return t;
}

int32_t blocks_for(size_t tokens) { return static_cast<int32_t>((tokens + 15) / 16); }

int64_t argmax(std::span<const float> row) {
  return static_cast<int64_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// All logits of `tokens` from one step of a fresh sequence (blocks 0..).
std::vector<float> whole_logits(cuda_model_runner& runner, const std::vector<int32_t>& tokens) {
  auto table = iota_table(blocks_for(tokens.size()));
  step_sequence sq{0, tokens, 0, table, logits_mode::all};
  step_result r;
  runner.step(std::span<const step_sequence>(&sq, 1), r);
  BOOST_REQUIRE_EQUAL(r.num_rows[0], static_cast<int64_t>(tokens.size()));
  return r.logits;
}

}  // namespace

// ---- host-only cases ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(moe_is_refused_before_touching_the_device) {
  auto ck = load("tiny-moe");
  expect_error([&] { cuda_model_runner runner(*ck, 4); }, errc::unsupported, "Qwen3MoeForCausalLM (MoE) is not supported");
  BOOST_CHECK_NO_THROW(cuda_model_runner::check_supported(load("tiny-dense")->config));
}

// The attention kernel reads rows as float4s, up to 512 floats: other head sizes are refused with
// the size named, before any device work (Qwen3's is 128).
BOOST_AUTO_TEST_CASE(head_dims_the_kernels_cannot_take_are_refused_before_touching_the_device) {
  for (int64_t d : {int64_t{0}, int64_t{18}, int64_t{514}, int64_t{1024}}) {
    model_config cfg = load("tiny-dense")->config;
    cfg.head_dim = d;
    expect_error([&] { cuda_model_runner::check_supported(cfg); }, errc::unsupported,
                 "head_dim must be a multiple of 4 up to 512 (Qwen3's is 128); got " + std::to_string(d));
  }
  for (int64_t d : {int64_t{4}, int64_t{32}, int64_t{128}, int64_t{512}}) {
    model_config cfg = load("tiny-dense")->config;
    cfg.head_dim = d;
    BOOST_CHECK_NO_THROW(cuda_model_runner::check_supported(cfg));
  }
}

// A checkpoint without lm_head (an embedding-only export) has nothing for this runner's logits.
BOOST_AUTO_TEST_CASE(a_checkpoint_without_lm_head_is_refused_before_touching_the_device) {
  auto ck = load_checkpoint(golden_dir("tiny-dense"));
  ck->no_lm_head = true;
  expect_error([&] { cuda_model_runner runner(*ck, 4); }, errc::unsupported,
               "has no lm_head.weight (an embedding-only export)");
}

BOOST_AUTO_TEST_CASE(bad_batches_are_refused_before_any_work) {
  const auto& cfg = load("tiny-dense")->config;
  std::vector<int32_t> table{0, 1}, ok_tokens{1, 2, 3}, bad_id{1, 4096}, none;
  auto expect = [&](step_sequence sq, errc code, const std::string& needle) {
    expect_error([&] { cuda_model_runner::validate(cfg, 4, 16, std::span<const step_sequence>(&sq, 1)); }, code, needle);
  };
  expect({7, none, 0, table}, errc::invalid_input, "sequence 7 has no tokens");
  expect({1, bad_id, 0, table}, errc::out_of_range, "token id 4096 is outside the vocabulary");
  expect({1, ok_tokens, 30, table}, errc::invalid_input, "block table has 2 blocks");
  std::vector<int32_t> bad_table{0, 9};
  expect({1, ok_tokens, 14, bad_table}, errc::out_of_range, "block id 9 is outside the KV pool");
  expect({1, ok_tokens, 40958, table}, errc::out_of_range, "reaches position 40961");
  step_sequence fine{1, ok_tokens, 0, table};
  BOOST_CHECK_NO_THROW(cuda_model_runner::validate(cfg, 4, 16, std::span<const step_sequence>(&fine, 1)));
}

// ---- device cases -------------------------------------------------------------------------------

BOOST_DATA_TEST_CASE(prompt_logits_match_reference, boost::unit_test::data::make(kDenseSets), set) {
  require_device();
  auto ck = load(set);
  const int64_t vocab = ck->config.vocab_size;
  int32_t blocks = 0;
  auto cases = load_golden(set);
  for (const auto& c : cases) blocks = std::max(blocks, blocks_for(c.prompt.size()));
  cuda_model_runner runner(*ck, blocks);
  double worst = 0;
  for (const auto& c : cases) {
    auto logits = whole_logits(runner, c.prompt);
    for (size_t r = 0; r < c.prompt_logits.index.size(); ++r) {
      const int64_t pos = c.prompt_logits.index[r];
      const double err = row_error(logits.data() + pos * vocab, c.prompt_logits.data.data() + r * vocab, vocab);
      worst = std::max(worst, err);
      BOOST_TEST(err <= kTolerance, set << " " << c.id << " position " << pos << ": relative error " << err);
    }
  }
  BOOST_TEST_MESSAGE(set << ": worst relative logits error vs float64 " << worst << " (tolerance " << kTolerance
                         << ")");
}

BOOST_DATA_TEST_CASE(greedy_decode_matches_reference, boost::unit_test::data::make(kDenseSets), set) {
  require_device();
  auto ck = load(set);
  const int64_t vocab = ck->config.vocab_size;
  double worst = 0;
  for (const auto& c : load_golden(set)) {
    const size_t max_len = c.prompt.size() + c.greedy.size();
    cuda_model_runner runner(*ck, blocks_for(max_len));
    auto table = iota_table(blocks_for(max_len));
    const auto got = decode_and_check(runner, table, c, vocab, set, kTolerance, -1, &worst);
    BOOST_TEST(got == c.greedy, boost::test_tools::per_element());
  }
  BOOST_TEST_MESSAGE(set << ": worst decode-step error vs float64 " << worst);
}

// Prefill in chunks of 5 (logits all), then token-by-token decode through the KV cache, against
// one step over the whole sequence: the same logits within the tolerance at every position.
BOOST_DATA_TEST_CASE(incremental_equals_full_recomputation, boost::unit_test::data::make(kDenseSets), set) {
  require_device();
  auto ck = load(set);
  const int64_t vocab = ck->config.vocab_size;
  const auto c = load_golden(set).back();
  std::vector<int32_t> seq = c.prompt;
  seq.insert(seq.end(), c.greedy.begin(), c.greedy.end());
  cuda_model_runner runner(*ck, 2 * blocks_for(seq.size()));
  const auto whole = whole_logits(runner, seq);

  // The second half of the pool, so nothing of the whole run is reused.
  auto table = iota_table(blocks_for(seq.size()), blocks_for(seq.size()));
  std::vector<float> inc(whole.size());
  const size_t prompt = c.prompt.size();
  size_t pos = 0;
  while (pos < seq.size()) {
    const size_t cnt = pos < prompt ? std::min<size_t>(5, prompt - pos) : 1;
    step_sequence sq{0, std::span<const int32_t>(seq.data() + pos, cnt), static_cast<int32_t>(pos), table,
                     logits_mode::all};
    step_result r;
    runner.step(std::span<const step_sequence>(&sq, 1), r);
    BOOST_REQUIRE_EQUAL(r.num_rows[0], static_cast<int64_t>(cnt));
    std::copy(r.logits.begin(), r.logits.end(), inc.begin() + static_cast<int64_t>(pos) * vocab);
    pos += cnt;
  }
  double worst = 0;
  for (size_t p = 0; p < seq.size(); ++p) {
    const double err = row_error(inc.data() + p * vocab, whole.data() + p * vocab, vocab);
    worst = std::max(worst, err);
    BOOST_TEST(err <= kTolerance, set << " position " << p << ": incremental vs whole " << err);
  }
  BOOST_TEST_MESSAGE(set << ": worst incremental-vs-whole error " << worst);
}

// Three sequences of different lengths in three steps that mix a mid-prompt chunk (logits none),
// a whole prompt, a short chunk, prompt ends and decodes, with reversed, interleaved block ids:
// every row equal (within the tolerance) to that sequence computed alone in one step.
BOOST_DATA_TEST_CASE(mixed_batch_equals_each_alone, boost::unit_test::data::make(kMixedSets), set) {
  require_device();
  auto ck = load(set);
  const int64_t vocab = ck->config.vocab_size;
  auto cases = load_golden(set);
  BOOST_REQUIRE_GE(cases.size(), 4u);
  // A, B, C: the 33-, 7- and 200-token prompts (case 0 has one token), each + 2 decode tokens (the
  // reference's greedy ids).
  const size_t pick[3] = {2, 1, 3};
  std::vector<std::vector<int32_t>> seqs;
  std::vector<size_t> plen;
  for (size_t i : pick) {
    BOOST_REQUIRE_GE(cases[i].prompt.size(), 4u);
    auto s = cases[i].prompt;
    plen.push_back(s.size());
    s.push_back(cases[i].greedy.at(0));
    s.push_back(cases[i].greedy.size() > 1 ? cases[i].greedy[1] : cases[i].greedy[0]);
    seqs.push_back(std::move(s));
  }
  int32_t total_blocks = 0;
  for (const auto& s : seqs) total_blocks += blocks_for(s.size());
  cuda_model_runner runner(*ck, 2 * total_blocks + 4);
  std::vector<std::vector<float>> alone;
  for (const auto& s : seqs) alone.push_back(whole_logits(runner, s));

  std::vector<std::vector<int32_t>> tables(3);
  int32_t next = runner.kv().num_blocks() - 1, max_blocks = 0;
  for (const auto& s : seqs) max_blocks = std::max(max_blocks, blocks_for(s.size()));
  for (size_t b = 0; b < static_cast<size_t>(max_blocks); ++b)
    for (size_t i = 0; i < 3; ++i)
      if (b < static_cast<size_t>(blocks_for(seqs[i].size()))) tables[i].push_back(next--);

  // Plan per sequence: [start, count, mode] for each of 3 steps. A: chunk, rest of prompt, decode;
  // B: whole prompt, decode, decode; C: 3 tokens, rest of prompt, decode.
  struct piece {
    size_t start, count;
    logits_mode mode;
  };
  const size_t la = plen[0], lb = plen[1], lc = plen[2];
  const size_t a1 = la / 2, c1 = 3;
  const piece plan[3][3] = {
      {{0, a1, logits_mode::none}, {a1, la - a1, logits_mode::all}, {la, 1, logits_mode::last}},
      {{0, lb, logits_mode::all}, {lb, 1, logits_mode::last}, {lb + 1, 1, logits_mode::last}},
      {{0, c1, logits_mode::last}, {c1, lc - c1, logits_mode::all}, {lc, 1, logits_mode::last}},
  };
  double worst = 0;
  for (int st = 0; st < 3; ++st) {
    std::vector<step_sequence> batch;
    for (size_t i = 0; i < 3; ++i) {
      const piece& p = plan[i][st];
      batch.push_back({static_cast<int64_t>(i), std::span<const int32_t>(seqs[i].data() + p.start, p.count),
                       static_cast<int32_t>(p.start), tables[i], p.mode});
    }
    step_result r;
    runner.step(batch, r);
    for (size_t i = 0; i < 3; ++i) {
      const piece& p = plan[i][st];
      const int64_t want = p.mode == logits_mode::none ? 0 : p.mode == logits_mode::last ? 1 : static_cast<int64_t>(p.count);
      BOOST_REQUIRE_EQUAL(r.num_rows[i], want);
      for (int64_t k = 0; k < want; ++k) {
        const size_t pos = p.mode == logits_mode::last ? p.start + p.count - 1 : p.start + static_cast<size_t>(k);
        const double err = row_error(r.row(i, k).data(), alone[i].data() + pos * vocab, vocab);
        worst = std::max(worst, err);
        BOOST_TEST(err <= kTolerance, set << " step " << st << " sequence " << i << " position " << pos
                                          << ": batched vs alone " << err);
      }
    }
  }
  BOOST_TEST_MESSAGE(set << ": worst batched-vs-alone error " << worst);
}

// FP8 weights quantized on load (Qwen's 128 x 128 blocks; lm_head stays in its float dtype): the
// device runs W8A8 (matmul_fp8_block rounds each activation row to e4m3 per 128 columns). Its CPU
// reference is the CPU engine with model_runner_options::fp8_activations, the same rounding before
// the same products (tests/runtime/quant checks that emulation against a float64 forward pass).
// Not row by row within a tolerance: the rounding is a step function, and the device's sums (the
// tensor cores keep ~13 mantissa bits inside each 128-deep block, docs/cuda.md) differ from the
// CPU's in the low bits, which moves some activations to the neighbouring e4m3 value and the
// change grows through the layers. So on average, the measure of tests/runtime/quant: the device
// must be at least kCloser times closer to the CPU's W8A8 than the CPU's own W8A16 is (the error of
// the scheme itself), and agree with its top-1 at least as often. A device that skipped the
// activation rounding would be about as far as W8A16; a wrong scale, block index or code much
// further.
namespace {

void require_fp8_device() {
  require_device();
  if (device_sm() < 89) {
    std::printf("SKIP: %s has no FP8 tensor cores (needs sm_89+)\n", kernels::cuda::describe_device(0).c_str());
    std::fflush(stdout);
    std::exit(kSkipCode);
  }
}

// The comparison above for an FP8 checkpoint `ck` over `prompts` (all logits rows of each), on a
// runner that made `stacked` stacked products.
void check_fp8_against_cpu_w8a8(const checkpoint& ck, const std::vector<std::vector<int32_t>>& prompts,
                                const std::string& what, int64_t stacked) {
  constexpr double kCloser = 0.5;
  const int64_t vocab = ck.config.vocab_size;
  int32_t blocks = 0;
  for (const auto& p : prompts) blocks = std::max(blocks, blocks_for(p.size()));
  kv_cache kv_w8a8(ck.config, blocks), kv_w8a16(ck.config, blocks);
  model_runner_options w8a8_opts;
  w8a8_opts.fp8_activations = true;
  model_runner w8a8(ck, kv_w8a8, w8a8_opts), w8a16(ck, kv_w8a16);
  cuda_model_runner gpu(ck, blocks);
  BOOST_TEST(gpu.stacked_products() == stacked, what << ": " << gpu.stacked_products() << " stacked products");
  BOOST_TEST_MESSAGE(what << " fp8: device weight bytes per step " << gpu.weight_bytes_per_step());
  double gpu_mean = 0, gpu_worst = 0, w8a16_mean = 0;
  int64_t rows = 0, gpu_agree = 0, w8a16_agree = 0;
  for (const auto& prompt : prompts) {
    auto table = iota_table(blocks_for(prompt.size()));
    step_sequence sq{0, prompt, 0, table, logits_mode::all};
    step_result ref, r16, rg;
    w8a8.step(std::span<const step_sequence>(&sq, 1), ref);
    w8a16.step(std::span<const step_sequence>(&sq, 1), r16);
    gpu.step(std::span<const step_sequence>(&sq, 1), rg);
    BOOST_REQUIRE_EQUAL(rg.logits.size(), ref.logits.size());
    for (int64_t p = 0; p < static_cast<int64_t>(prompt.size()); ++p, ++rows) {
      const double err = row_error(rg.row(0, p).data(), ref.row(0, p).data(), vocab);
      gpu_mean += err;
      gpu_worst = std::max(gpu_worst, err);
      w8a16_mean += row_error(r16.row(0, p).data(), ref.row(0, p).data(), vocab);
      gpu_agree += argmax(rg.row(0, p)) == argmax(ref.row(0, p));
      w8a16_agree += argmax(r16.row(0, p)) == argmax(ref.row(0, p));
    }
  }
  gpu_mean /= static_cast<double>(rows);
  w8a16_mean /= static_cast<double>(rows);
  const double gpu_top1 = static_cast<double>(gpu_agree) / static_cast<double>(rows);
  const double w8a16_top1 = static_cast<double>(w8a16_agree) / static_cast<double>(rows);
  BOOST_TEST_MESSAGE(what << " fp8 vs the CPU's W8A8 over " << rows << " rows: device mean row error " << gpu_mean
                          << " (worst " << gpu_worst << "), top-1 " << gpu_top1 << "; CPU W8A16 mean " << w8a16_mean
                          << ", top-1 " << w8a16_top1 << "; ratio " << gpu_mean / w8a16_mean << " (bound " << kCloser << ")");
  BOOST_TEST(gpu_mean <= kCloser * w8a16_mean, what << ": device " << gpu_mean << " from the CPU's W8A8, W8A16 " << w8a16_mean);
  BOOST_TEST(gpu_top1 >= w8a16_top1, what << ": device top-1 " << gpu_top1 << " below W8A16's " << w8a16_top1);
}

}  // namespace

BOOST_DATA_TEST_CASE(fp8_weights_match_cpu_engine, boost::unit_test::data::make(kDenseSets), set) {
  require_fp8_device();
  quant::load_options lo;
  lo.quantization = quant::method::fp8;
  auto ck = quant::load_model(golden_dir(set), lo);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : load_golden(set)) prompts.push_back(c.prompt);
  // k and v (2 x 32 rows), gate and up (160 rows) are not whole 128-row blocks: nothing stacks.
  check_fp8_against_cpu_w8a8(*ck, prompts, set, 0);
}

// The golden models' k, v (64 rows) and gate, up (160 rows) are not whole 128-row FP8 scale
// blocks, so there the runner multiplies them apart; every Qwen3 shape stacks them into one QKV
// and one gate/up product. A random model shaped to stack (q 256, k and v 128, gate and up 384
// rows), the same comparison.
BOOST_AUTO_TEST_CASE(stacked_fp8_products_match_cpu_engine) {
  require_fp8_device();
  model_config cfg = preset_config("tiny");
  cfg.hidden_size = 256;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.head_dim = 64;
  cfg.intermediate_size = 384;
  random_checkpoint_options o;
  o.seed = 7;
  o.force = true;
  if (const char* t = std::getenv("TROUPE_TOKENIZER_DIR"); t != nullptr && *t != '\0') o.tokenizer_dir = t;
  const std::string dir = (std::filesystem::temp_directory_path() / "troupe-cuda-stacked-fp8").string();
  write_random_checkpoint(dir, cfg, qwen3_generation_defaults(), o);
  quant::load_options lo;
  lo.quantization = quant::method::fp8;
  auto ck = quant::load_model(dir, lo);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t len : {40, 97, 150}) {
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i)
      p[static_cast<size_t>(i)] = static_cast<int32_t>(detail::mix64(static_cast<uint64_t>(len * 1000 + i)) % cfg.vocab_size);
    prompts.push_back(std::move(p));
  }
  check_fp8_against_cpu_w8a8(*ck, prompts, "stacked", 2 * cfg.num_hidden_layers);
  std::filesystem::remove_all(dir);
}

// Decode graphs (cuda_runner_options::graphs): a runner that replays them and one that launches
// kernel by kernel give the same logits bit for bit (the same kernels with the same arguments),
// step after step at batch sizes 8, 3 and 1, for float32 and FP8 weights. A larger step in
// between regrows the scratch the graphs point into, so they must be captured again, with the
// same results.
BOOST_DATA_TEST_CASE(decode_graphs_equal_eager_launches_bitwise,
                     boost::unit_test::data::make({"tiny-dense", "e2e-full-vocab"}), set) {
  require_device();
  quant::load_options lo;
  lo.quantization = quant::method::fp8;
  auto fp8 = quant::load_model(golden_dir(set), lo);
  const checkpoint* f32 = load(set).get();  // the cache keeps it
  for (const checkpoint* ck : {f32, static_cast<const checkpoint*>(fp8.get())}) {
    const std::string what = std::string(set) + (ck == fp8.get() ? " fp8" : " f32");
    const int64_t vocab = ck->config.vocab_size;
    constexpr int32_t kSeqs = 8, kPerSeq = 8, kBig = 400;  // 8 blocks: 128 positions a sequence
    const int32_t blocks = kSeqs * kPerSeq + blocks_for(kBig);
    cuda_runner_options eager_opts;
    eager_opts.graphs = false;
    cuda_model_runner graphs(*ck, blocks), eager(*ck, blocks, 16, eager_opts);
    if (!graphs.graphs_enabled()) {
      BOOST_TEST_MESSAGE(what << ": graphs are off in this environment (TROUPE_CUDA_GRAPHS=0 or TROUPE_CUDA_SYNC_CHECK)");
      return;
    }
    BOOST_TEST(!eager.graphs_enabled());
    if (ck == f32) BOOST_TEST(graphs.stacked_products() == 2 * ck->config.num_hidden_layers);  // float: always
    std::vector<std::vector<int32_t>> seqs(kSeqs), tables(kSeqs);
    for (int32_t i = 0; i < kSeqs; ++i) {
      for (int32_t j = 0; j < 5 + 9 * i; ++j) seqs[i].push_back(static_cast<int32_t>((i * 7919 + j * 104729) % vocab));
      tables[i] = iota_table(kPerSeq, i * kPerSeq);
    }
    std::vector<int32_t> pos(kSeqs, 0);
    auto both = [&](std::vector<step_sequence> batch, const std::string& step) {
      step_result rg, re;
      graphs.step(batch, rg);
      eager.step(batch, re);
      BOOST_REQUIRE_EQUAL(rg.logits.size(), re.logits.size());
      BOOST_TEST(std::memcmp(rg.logits.data(), re.logits.data(), rg.logits.size() * sizeof(float)) == 0,
                 what << " " << step << ": graph replay differs from eager launches");
      return re;
    };
    auto decode = [&](int32_t nb, const std::string& step) {
      std::vector<step_sequence> batch;
      for (int32_t i = 0; i < nb; ++i)
        batch.push_back({i, std::span<const int32_t>(&seqs[i].back(), 1), pos[i], tables[i], logits_mode::last});
      const auto r = both(batch, step);
      for (int32_t i = 0; i < nb; ++i) {
        ++pos[i];
        seqs[i].push_back(static_cast<int32_t>(argmax(r.row(static_cast<size_t>(i)))));
      }
    };
    {  // every prompt but its last token in one step
      std::vector<step_sequence> batch;
      for (int32_t i = 0; i < kSeqs; ++i) {
        batch.push_back({i, std::span<const int32_t>(seqs[i].data(), seqs[i].size() - 1), 0, tables[i], logits_mode::none});
        pos[i] = static_cast<int32_t>(seqs[i].size() - 1);
      }
      both(batch, "prefill");
    }
    for (int round = 0; round < 2; ++round)
      for (int32_t nb : {kSeqs, 3, 1}) decode(nb, "decode of " + std::to_string(nb));
    BOOST_TEST(graphs.graphs_captured() == 3);
    BOOST_TEST(graphs.graph_replays() == 6);
    {  // a longer step than any before: the scratch grows
      std::vector<int32_t> big(kBig);
      for (int32_t j = 0; j < kBig; ++j) big[j] = static_cast<int32_t>((j * 31337) % vocab);
      const auto table = iota_table(blocks_for(kBig), kSeqs * kPerSeq);
      both({step_sequence{99, big, 0, table, logits_mode::last}}, "long prompt");
    }
    for (int32_t nb : {kSeqs, 3, 1}) decode(nb, "decode of " + std::to_string(nb) + " after the long prompt");
    BOOST_TEST(graphs.graphs_captured() == 6, what << ": " << graphs.graphs_captured() << " captures");
    BOOST_TEST(graphs.graph_replays() == 9);
    BOOST_TEST(eager.graph_replays() == 0);
  }
}

// Embedding requests (logits_mode::hidden) in a batch beside a generating sequence: the hidden row
// is the CPU engine's within the tolerance, and the other sequence's logits are its own alone.
BOOST_DATA_TEST_CASE(hidden_states_match_cpu_engine, boost::unit_test::data::make(kDenseSets), set) {
  require_device();
  auto ck = load(set);
  const auto cases = load_golden(set);
  const auto& a = cases.front().prompt;
  const auto& b = cases.back().prompt;
  const int32_t na = blocks_for(a.size()), nb = blocks_for(b.size());

  kv_cache cpu_kv(ck->config, na, 16);
  model_runner cpu(*ck, cpu_kv);
  auto cpu_table = iota_table(na);
  step_sequence cpu_sq{7, a, 0, cpu_table, logits_mode::hidden};
  step_result want;
  cpu.step(std::span<const step_sequence>(&cpu_sq, 1), want);

  cuda_model_runner runner(*ck, 2 * (na + nb));
  const auto alone = whole_logits(runner, b);
  auto ta = iota_table(na, nb), tb = iota_table(nb, na + nb);
  const step_sequence batch[] = {{1, b, 0, tb, logits_mode::last}, {7, a, 0, ta, logits_mode::hidden}};
  step_result got;
  runner.step(batch, got);
  BOOST_REQUIRE_EQUAL(got.num_rows[0], 1);
  BOOST_REQUIRE_EQUAL(got.num_rows[1], 0);
  BOOST_REQUIRE_EQUAL(got.hidden_row[0], -1);
  BOOST_REQUIRE_EQUAL(got.hidden_row[1], 0);
  BOOST_REQUIRE_EQUAL(got.hidden_size, ck->config.hidden_size);
  const double herr = row_error(got.hidden_of(1).data(), want.hidden_of(0).data(), ck->config.hidden_size);
  BOOST_TEST(herr <= kTolerance, set << ": hidden state vs the CPU engine " << herr);
  const int64_t vocab = ck->config.vocab_size;
  const double lerr = row_error(got.row(0).data(), alone.data() + (static_cast<int64_t>(b.size()) - 1) * vocab, vocab);
  BOOST_TEST(lerr <= kTolerance, set << ": logits beside an embedding vs alone " << lerr);
}

// Prefix caching's block copies: a block read from the device pool holds what the CPU pool holds
// for the same prompt (the payload layout), and a block written back is read by the next step as if
// computed there: decoding through a table whose blocks are copies gives the same logits bitwise.
BOOST_AUTO_TEST_CASE(kv_blocks_read_and_write_in_the_cpu_pools_layout) {
  require_device();
  auto ck = load("tiny-dense");
  const auto& cfg = ck->config;
  const auto c = load_golden("tiny-dense").back();
  const int32_t n = blocks_for(c.prompt.size() + 1);

  kv_cache cpu_kv(cfg, n, 16);
  model_runner cpu(*ck, cpu_kv);
  cuda_model_runner runner(*ck, 2 * n);
  auto table = iota_table(n);
  step_sequence sq{0, c.prompt, 0, table, logits_mode::none};
  step_result r;
  cpu.step(std::span<const step_sequence>(&sq, 1), r);
  runner.step(std::span<const step_sequence>(&sq, 1), r);

  auto& pool = runner.kv();
  const size_t part = static_cast<size_t>(16 * cfg.num_key_value_heads * cfg.head_dim);
  BOOST_REQUIRE_EQUAL(pool.block_floats(), 2 * static_cast<size_t>(cfg.num_hidden_layers) * part);
  std::vector<float> block(pool.block_floats());
  const int32_t full = static_cast<int32_t>(c.prompt.size() / 16);  // blocks the prompt fills
  BOOST_REQUIRE_GE(full, 1);
  for (int32_t b = 0; b < full; ++b) {
    pool.read_block(b, block);
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      const float* k = cpu_kv.layer(l).k + static_cast<size_t>(b) * part;
      const float* v = cpu_kv.layer(l).v + static_cast<size_t>(b) * part;
      const double ek = row_error(block.data() + 2 * l * part, k, static_cast<int64_t>(part));
      const double ev = row_error(block.data() + (2 * l + 1) * part, v, static_cast<int64_t>(part));
      BOOST_TEST(ek <= kTolerance, "block " << b << " layer " << l << " K vs the CPU pool " << ek);
      BOOST_TEST(ev <= kTolerance, "block " << b << " layer " << l << " V vs the CPU pool " << ev);
    }
  }
  // Copy every block of the prompt to the second half of the pool, then decode the next token
  // through each table: bitwise the same logits.
  for (int32_t b = 0; b < n; ++b) {
    pool.read_block(b, block);
    pool.write_block(n + b, block);
  }
  auto copies = iota_table(n, n);
  const int32_t next = c.greedy.front();
  const int32_t at = static_cast<int32_t>(c.prompt.size());
  step_sequence d1{0, std::span<const int32_t>(&next, 1), at, table, logits_mode::last};
  step_result r1, r2;
  runner.step(std::span<const step_sequence>(&d1, 1), r1);
  step_sequence d2{0, std::span<const int32_t>(&next, 1), at, copies, logits_mode::last};
  runner.step(std::span<const step_sequence>(&d2, 1), r2);
  BOOST_TEST(std::memcmp(r1.logits.data(), r2.logits.data(), r1.logits.size() * sizeof(float)) == 0);

  expect_error([&] { pool.read_block(2 * n, block); }, errc::invalid_argument, "block " + std::to_string(2 * n) + " outside the pool of");
  block.pop_back();
  expect_error([&] { pool.write_block(0, block); }, errc::invalid_argument, "floats; a block of this pool has");
}
