// Pipeline parallelism (parallel_runner): stages of consecutive layers, each holding its layers'
// K/V, the residual stream handed from stage to stage, a step's batch run as a wavefront of
// micro-batches (micro_batch.hpp). Every stage computes its layers exactly as one runner does, so
// the logits must equal the runner without stages bit for bit: on every golden set (and the
// reference's greedy tokens through the stages' pools), on deeper random models split every way,
// with tensor and expert parallelism inside each stage and with LoRA adapters; the cut and merge
// of micro-batches on their own; each way a layout or a batch can be refused; and a stage that
// fails inside a step.
#define BOOST_TEST_MODULE troupe_pipeline_parallel
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "runtime/core/error.hpp"
#include "runtime/core/numa_nodes.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/engine/micro_batch.hpp"
#include "runtime/engine/parallel_runner.hpp"
#include "runtime/lora/lora_adapter.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "runtime/model/shard.hpp"
#include "runtime/quant/load.hpp"
#include "tests/runtime/engine/batch_invariance.hpp"
#include "tests/runtime/engine/cached_decode.hpp"
#include "tests/runtime/engine/expect_error.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr double kTolerance = 1e-4;  // the engine's own (model_runner_test.cpp)

// Most tests force the wavefront: this machine's one NUMA node would make `auto` run in turn.
parallel_config stages(int32_t pp, std::vector<int64_t> layers = {}, int32_t tp = 1, bool ep = false,
                       pipeline_schedule schedule = pipeline_schedule::wavefront) {
  parallel_config p{tp, ep};
  p.pipeline_size = pp;
  p.pipeline_layers = std::move(layers);
  p.schedule = schedule;
  return p;
}

parallel_config in_turn(parallel_config p) {
  p.schedule = pipeline_schedule::in_turn;
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::filesystem::path deep_model_dir(int64_t layers, bool moe) {
  return std::filesystem::temp_directory_path() /
         ("troupe_pp_" + std::to_string(layers) + (moe ? "moe_" : "_") + std::to_string(::getpid()));
}

// A random model of `layers` layers (tiny's widths, a 4096-id vocabulary), every other layer a
// mixture of experts when `moe`, written once per process (deep_model_dir).
std::shared_ptr<checkpoint> deep_model(int64_t layers, bool moe) {
  const auto dir = deep_model_dir(layers, moe);
  model_config c = preset_config(moe ? "qwen3-moe-tiny" : "tiny");
  c.vocab_size = 4096;
  c.bos_token_id = 4094;
  c.eos_token_ids = {4095};
  c.num_hidden_layers = layers;
  if (moe) c.decoder_sparse_step = 2;  // layers 1, 3, ... MoE; the others dense
  if (!std::filesystem::exists(dir / "config.json")) {
    random_checkpoint_options o;
    o.seed = 5;
    write_random_checkpoint(dir.string(), c, qwen3_generation_defaults(), o);
  }
  return load_checkpoint(dir.string());
}

// The models deep_model wrote go when the tests end.
struct remove_deep_models {
  ~remove_deep_models() {
    for (const bool moe : {false, true}) std::filesystem::remove_all(deep_model_dir(5, moe));
  }
};
BOOST_TEST_GLOBAL_FIXTURE(remove_deep_models);

std::vector<int32_t> random_ids(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % 4000);
  return v;
}

// Two steps of a mixed batch on `runner`: a 200-token prompt (cut over several micro-batches), a
// prompt's second chunk after its first, then each sequence decodes one token, rows of every
// logits mode asked for. Returns every logits and hidden row of both steps.
template <class Runner>
std::vector<float> mixed_steps(Runner& runner) {
  const auto a = random_ids(200, 1), b = random_ids(40, 2), c = random_ids(9, 3);
  std::vector<int32_t> ta(14), tb(4), tc(2);
  std::iota(ta.begin(), ta.end(), 0);
  std::iota(tb.begin(), tb.end(), 20);
  std::iota(tc.begin(), tc.end(), 30);
  step_result r;
  std::vector<float> out;
  auto keep = [&] {
    out.insert(out.end(), r.logits.begin(), r.logits.end());
    out.insert(out.end(), r.hidden.begin(), r.hidden.end());
  };
  step_sequence first{2, std::span<const int32_t>(b).first(17), 0, tb, logits_mode::none};
  runner.step(std::span<const step_sequence>(&first, 1), r);
  std::vector<step_sequence> batch{{0, a, 0, ta, logits_mode::all},
                                   {2, std::span<const int32_t>(b).subspan(17), 17, tb, logits_mode::last},
                                   {3, c, 0, tc, logits_mode::hidden}};
  runner.step(batch, r);
  keep();
  const int32_t next[] = {7, 8, 9};
  batch = {{0, std::span<const int32_t>(next, 1), 200, ta, logits_mode::last},
           {2, std::span<const int32_t>(next + 1, 1), 40, tb, logits_mode::all},
           {3, std::span<const int32_t>(next + 2, 1), 9, tc, logits_mode::last}};
  runner.step(batch, r);
  keep();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(micro_batches_cut_sequences_and_merge_their_rows) {
  const std::vector<int32_t> p0(10, 1), p1(7, 2), d(1, 3), table(4, 0);
  const std::vector<step_sequence> batch{{10, p0, 0, table, logits_mode::all},
                                         {11, p1, 5, table, logits_mode::last},
                                         {12, d, 30, table, logits_mode::hidden}};
  const auto parts = split_micro_batches(batch, 3);  // 18 tokens: parts of 6, 6, 6
  BOOST_REQUIRE_EQUAL(parts.size(), 3u);
  for (const auto& p : parts) BOOST_TEST(p.tokens == 6);
  BOOST_REQUIRE_EQUAL(parts[0].seqs.size(), 1u);
  BOOST_TEST(parts[0].seqs[0].tokens.size() == 6u);
  BOOST_TEST((parts[0].seqs[0].logits == logits_mode::all));  // a cut 'all' sequence keeps its rows
  BOOST_REQUIRE_EQUAL(parts[1].seqs.size(), 2u);
  BOOST_TEST(parts[1].seqs[0].start_pos == 6);
  BOOST_TEST(parts[1].seqs[0].tokens.data() == p0.data() + 6);
  BOOST_TEST(parts[1].seqs[1].seq_id == 11);
  BOOST_TEST(parts[1].seqs[1].start_pos == 5);
  BOOST_TEST(parts[1].seqs[1].tokens.size() == 2u);
  BOOST_TEST((parts[1].seqs[1].logits == logits_mode::none));  // its last row is in the next part
  BOOST_REQUIRE_EQUAL(parts[2].seqs.size(), 2u);
  BOOST_TEST(parts[2].seqs[0].start_pos == 7);
  BOOST_TEST((parts[2].seqs[0].logits == logits_mode::last));
  BOOST_TEST((parts[2].source == std::vector<size_t>{1, 2}));
  BOOST_TEST(split_micro_batches(batch, 40).size() == 18u);  // never more parts than tokens
  BOOST_TEST(split_micro_batches(batch, 0).size() == 1u);

  // Results as a runner gives them: row value = 1000 * source + position, hidden = -position.
  const int64_t vocab = 2, hidden = 3;
  std::vector<step_result> results(parts.size());
  for (size_t j = 0; j < parts.size(); ++j) {
    auto& r = results[j];
    r.vocab_size = vocab;
    r.hidden_size = hidden;
    r.hidden_row.assign(parts[j].seqs.size(), -1);
    for (size_t e = 0; e < parts[j].seqs.size(); ++e) {
      const auto& sq = parts[j].seqs[e];
      const auto n = static_cast<int64_t>(sq.tokens.size());
      r.first_row.push_back(static_cast<int64_t>(r.logits.size()) / vocab);
      int64_t rows = 0;
      for (int64_t t = 0; t < n; ++t)
        if (sq.logits == logits_mode::all || (sq.logits == logits_mode::last && t + 1 == n)) {
          r.logits.insert(r.logits.end(), vocab, static_cast<float>(1000 * parts[j].source[e] + sq.start_pos + t));
          ++rows;
        }
      r.num_rows.push_back(rows);
      if (sq.logits == logits_mode::hidden) {
        r.hidden_row[e] = static_cast<int64_t>(r.hidden.size()) / hidden;
        r.hidden.insert(r.hidden.end(), hidden, -static_cast<float>(sq.start_pos + n - 1));
      }
    }
  }
  step_result m;
  merge_micro_results(batch, parts, results, vocab, hidden, m);
  BOOST_TEST((m.num_rows == std::vector<int64_t>{10, 1, 0}));
  for (int64_t t = 0; t < 10; ++t) BOOST_TEST(m.row(0, t)[1] == static_cast<float>(t));
  BOOST_TEST(m.row(1)[0] == 1000.0f + 11);  // sequence 1's last position: 5 + 6
  BOOST_TEST(m.hidden_row[2] == 0);
  BOOST_TEST(m.hidden_of(2)[2] == -30.0f);
  BOOST_TEST(m.hidden_row[0] == -1);
}

BOOST_DATA_TEST_CASE(two_stages_equal_one_bitwise_and_match_the_reference, boost::unit_test::data::make(kGoldenSets), set) {
  auto ck = golden_checkpoint(set);
  const int64_t vocab = ck->config.vocab_size;
  generator one(*ck), two(*ck, stages(2)), turns(*ck, in_turn(stages(2)));
  for (const auto& c : load_golden(set)) {
    const auto whole = one.prompt_logits(c.prompt);
    BOOST_TEST(same_bits(two.prompt_logits(c.prompt), whole), set << " " << c.id << ": 2 stages differ from 1");
    BOOST_TEST(same_bits(two.prompt_logits(c.prompt, 3), whole), set << " " << c.id << ": chunks of 3 over 2 stages");
    BOOST_TEST(same_bits(turns.prompt_logits(c.prompt), whole), set << " " << c.id << ": 2 stages in turn differ");
    check_prompt_logits(whole, c, vocab, kTolerance, set);
    // Decode through the stages' pools against the reference's recomputation.
    const int64_t max_len = static_cast<int64_t>(c.prompt.size() + c.greedy.size());
    parallel_runner runner(*ck, static_cast<int32_t>((max_len + 15) / 16), 16, dtype::f32, {}, stages(2));
    BOOST_TEST(runner.pipeline_size() == 2);
    const int64_t layers = ck->config.num_hidden_layers;
    BOOST_TEST((runner.layer_bounds() == std::vector<int64_t>{0, layers - layers / 2, layers}));
    std::vector<int32_t> table(static_cast<size_t>(runner.num_blocks()));
    std::iota(table.begin(), table.end(), 0);
    BOOST_TEST(decode_and_check(runner, table, c, vocab, std::string(set) + " pp 2", kTolerance) == c.greedy,
               boost::test_tools::per_element());
  }
  const auto cases = load_golden(set);
  parallel_runner runner(*ck, batch_invariance_blocks(cases), 16, dtype::f32, {}, stages(2));
  check_batch_invariance_on(runner, runner.num_blocks(), cases, std::string(set) + " over 2 stages");
}

// Deeper random models, dense and mixed dense / MoE, split every way: each layout's two steps of a
// mixed batch (a prompt long enough for several micro-batches, a later chunk, decodes; all, last
// and hidden rows) give the bits of the runner without stages. Each stage's pool holds its layers.
BOOST_DATA_TEST_CASE(deeper_models_split_every_way_give_the_same_bits, boost::unit_test::data::make({false, true}), moe) {
  auto ck = deep_model(5, moe);
  parallel_runner whole_runner(*ck, 40, 16);
  const auto whole = mixed_steps(whole_runner);
  BOOST_REQUIRE(!whole.empty());
  const std::vector<parallel_config> layouts{stages(2), stages(3), stages(5), stages(2, {4, 1}), stages(2, {1, 4}),
                                             stages(3, {2, 2, 1})};
  for (const auto& p : layouts)
  for (const auto& q : {p, in_turn(p)}) {
    parallel_runner runner(*ck, 40, 16, dtype::f32, {}, q);
    BOOST_TEST((runner.schedule() == q.schedule));
    // In turn no two stages step at once: they share the first stage's scratch; a wavefront's don't.
    const bool shared = runner.stage(1).scratch() == runner.stage(0).scratch();
    BOOST_TEST(shared == (q.schedule == pipeline_schedule::in_turn));
    BOOST_TEST(runner.kv_bytes() == whole_runner.kv_bytes());  // the layers' K/V, split among the stages
    int64_t layers = 0;
    for (int32_t s = 0; s < runner.pipeline_size(); ++s) {
      const auto held = runner.stage(s).kv().num_layers();
      BOOST_TEST(held == runner.layer_bounds()[static_cast<size_t>(s) + 1] - runner.layer_bounds()[static_cast<size_t>(s)]);
      if (!p.pipeline_layers.empty()) BOOST_TEST(held == p.pipeline_layers[static_cast<size_t>(s)]);
      layers += held;
    }
    BOOST_TEST(layers == 5);
    BOOST_TEST(same_bits(mixed_steps(runner), whole),
               (moe ? "moe " : "dense ") << p.pipeline_size << " stages " << to_string(q.schedule) << " differ");
  }
}

// INT8 weights (quantized on load) and an INT8 or FP8 KV pool: each stage's pools quantize its
// layers' K/V with their own scales, and the stages give one runner's bits.
BOOST_AUTO_TEST_CASE(quantized_weights_and_kv_over_stages) {
  deep_model(5, true);  // written
  quant::load_options lo;
  lo.quantization = quant::method::int8;
  const auto ck = quant::load_model(deep_model_dir(5, true).string(), lo);
  for (const dtype kv : {dtype::i8, dtype::f8_e4m3}) {
    parallel_runner whole(*ck, 40, 16, kv);
    parallel_runner piped(*ck, 40, 16, kv, {}, stages(3));
    BOOST_TEST((piped.stage(2).kv().kv_type() == kv));
    BOOST_TEST(same_bits(mixed_steps(piped), mixed_steps(whole)), kv_cache::kv_dtype_name(kv) << " KV over 3 stages differs");
  }
}

// auto: a wavefront only where every stage can have a NUMA node; in turn on this one-node machine
// (and for one stage). The node count read from the list Linux gives.
BOOST_AUTO_TEST_CASE(the_schedule_follows_the_numa_nodes) {
  BOOST_TEST(count_list_entries("0") == 1);
  BOOST_TEST(count_list_entries("0-3,8,10-11\n") == 7);
  BOOST_TEST(count_list_entries("") == 0);
  BOOST_TEST(count_list_entries("1-0") == 0);
  BOOST_TEST(count_list_entries("a") == 0);
  BOOST_TEST(numa_node_count() >= 1);
  parallel_config p = stages(2, {}, 1, false, pipeline_schedule::automatic);
  const auto want = numa_node_count() >= 2 ? pipeline_schedule::wavefront : pipeline_schedule::in_turn;
  BOOST_TEST((resolved_schedule(p) == want));
  auto ck = golden_checkpoint("tiny-dense");
  BOOST_TEST((parallel_runner(*ck, 4, 16, dtype::f32, {}, p).schedule() == want));
  BOOST_TEST((resolved_schedule(stages(2)) == pipeline_schedule::wavefront));
  BOOST_TEST((resolved_schedule(parallel_config{}) == pipeline_schedule::in_turn));
  BOOST_TEST((parse_pipeline_schedule("in_turn", "x") == pipeline_schedule::in_turn));
  expect_error([] { parse_pipeline_schedule("eager", "--pipeline-schedule"); }, errc::invalid_argument,
               "--pipeline-schedule: 'eager' is not one of auto, wavefront, in_turn");
}

BOOST_AUTO_TEST_CASE(the_default_split_is_vllms) {
  auto ck = deep_model(5, false);
  BOOST_TEST((pipeline_layer_bounds(*ck, 1) == std::vector<int64_t>{0, 5}));
  BOOST_TEST((pipeline_layer_bounds(*ck, 2) == std::vector<int64_t>{0, 3, 5}));     // the extra layer before the last
  BOOST_TEST((pipeline_layer_bounds(*ck, 3) == std::vector<int64_t>{0, 2, 4, 5}));  // 1, 2 before the last: 2, 2, 1
  BOOST_TEST((pipeline_layer_bounds(*ck, 4) == std::vector<int64_t>{0, 1, 2, 4, 5}));
  const int64_t counts[] = {1, 3, 1};
  BOOST_TEST((pipeline_layer_bounds(*ck, 3, counts) == std::vector<int64_t>{0, 1, 4, 5}));
}

// Each stage a tensor-parallel group (experts sliced or whole): the bits of the same group without
// stages, and the reference's greedy tokens.
BOOST_AUTO_TEST_CASE(tensor_and_expert_parallel_stages) {
  auto ck = golden_checkpoint("tiny-moe");
  const auto cases = load_golden("tiny-moe");
  for (const bool ep : {false, true}) {
    generator group(*ck, parallel_config{2, ep}), piped(*ck, stages(2, {}, 2, ep));
    for (const auto& c : cases)
      BOOST_TEST(same_bits(piped.prompt_logits(c.prompt), group.prompt_logits(c.prompt)),
                 "tiny-moe tp 2" << (ep ? " ep" : "") << " " << c.id << ": 2 stages differ");
    parallel_runner runner(*ck, 32, 16, dtype::f32, {}, stages(2, {}, 2, ep));
    BOOST_TEST(runner.tp_size() == 2);
    std::vector<int32_t> table(32);
    std::iota(table.begin(), table.end(), 0);
    for (const auto& c : cases)
      BOOST_TEST(decode_and_check(runner, table, c, ck->config.vocab_size, "tiny-moe tp 2 pp 2", kTolerance) == c.greedy,
                 boost::test_tools::per_element());
  }
}

// LoRA pairs are found by the model's layer index in every stage: mixed adapters in one batch give
// each sequence its solo bits, and those equal the runner's without stages.
BOOST_AUTO_TEST_CASE(lora_adapters_over_stages) {
  auto ck = golden_checkpoint("tiny-dense-lora");
  const auto cases = load_golden("tiny-dense-lora");
  auto a = std::make_shared<const lora_adapter>(load_lora_adapter(golden_dir("tiny-dense-lora") + "/adapter", ck->config));
  parallel_runner piped(*ck, batch_invariance_blocks(cases) * 2, 16, dtype::f32, {}, stages(2));
  parallel_runner whole(*ck, 32, 16);
  BOOST_TEST(piped.add_adapter(a) == 0);
  BOOST_TEST(whole.add_adapter(a) == 0);
  BOOST_TEST(piped.num_adapters() == 1);
  check_mixed_adapter_invariance_on(piped, piped.num_blocks(), ck->config.vocab_size, cases, {-1, 0}, "pp 2 lora");
  std::vector<int32_t> table(32);
  std::iota(table.begin(), table.end(), 0);
  for (const auto& c : cases) {
    step_sequence sq{0, c.prompt, 0, table, logits_mode::all, 0};
    step_result x, y;
    piped.step(std::span<const step_sequence>(&sq, 1), x);
    whole.step(std::span<const step_sequence>(&sq, 1), y);
    BOOST_TEST(same_bits(x.logits, y.logits), c.id << ": the adapter over 2 stages differs");
  }
  piped.set_adapter(0, nullptr);  // emptied on every stage: refused before any stage runs
  step_sequence sq{0, cases[0].prompt, 0, table, logits_mode::last, 0};
  step_result r;
  expect_error([&] { piped.step(std::span<const step_sequence>(&sq, 1), r); }, errc::out_of_range, "which is empty");
}

// A middle stage that fails mid-wavefront (its adapter slot emptied behind the runner's back, so
// the first stage's checks pass): the step throws that stage's error at once, the last stage stops
// instead of waiting for parts that never come, and the runner's next steps are right.
BOOST_AUTO_TEST_CASE(a_stage_that_fails_stops_the_others) {
  auto ck = deep_model(5, false);
  auto a = std::make_shared<lora_adapter>();
  a->name = a->identity = "one-pair";
  a->r = 1;
  a->layers.resize(5);
  lora_pair& p = a->layers[2][static_cast<size_t>(lora_target::q_proj)];  // the middle stage's layer
  const auto [out, in] = lora_target_shapes(ck->config)[2][static_cast<size_t>(lora_target::q_proj)];
  p.rank = 1, p.out = out, p.in = in, p.scaling = 1.0f;
  p.a.assign(static_cast<size_t>(in), 0.01f);
  p.b.assign(static_cast<size_t>(out), 0.01f);
  a->pairs = 1;
  parallel_runner piped(*ck, 40, 16, dtype::f32, {}, stages(3));
  parallel_runner whole(*ck, 40, 16);
  piped.add_adapter(a);
  whole.add_adapter(a);
  piped.stage(1).set_adapter(0, nullptr);
  const auto prompt = random_ids(300, 9);  // 4 parts
  std::vector<int32_t> table(19);
  std::iota(table.begin(), table.end(), 0);
  for (int rep = 0; rep < 3; ++rep) {
    step_sequence sq{0, prompt, 0, table, logits_mode::last, 0};
    step_result r;
    expect_error([&] { piped.step(std::span<const step_sequence>(&sq, 1), r); }, errc::out_of_range, "which is empty");
  }
  BOOST_TEST(same_bits(mixed_steps(piped), mixed_steps(whole)), "after failed steps");
  {  // in turn: the same error from the same stage, and the stage's team size put back
    parallel_runner turns(*ck, 40, 16, dtype::f32, {}, in_turn(stages(3)));
    turns.add_adapter(a);
    turns.stage(1).set_adapter(0, nullptr);
    step_sequence sq{0, prompt, 0, table, logits_mode::last, 0};
    step_result r;
    expect_error([&] { turns.step(std::span<const step_sequence>(&sq, 1), r); }, errc::out_of_range, "which is empty");
    BOOST_TEST(same_bits(mixed_steps(turns), mixed_steps(whole)), "in turn, after a failed step");
  }
  piped.stage(1).set_adapter(0, a);  // back: the adapter's steps are right again
  step_sequence sq{0, prompt, 0, table, logits_mode::last, 0};
  step_result x, y;
  piped.step(std::span<const step_sequence>(&sq, 1), x);
  whole.step(std::span<const step_sequence>(&sq, 1), y);
  BOOST_TEST(same_bits(x.logits, y.logits));
}

BOOST_AUTO_TEST_CASE(layouts_the_model_cannot_take_are_refused_naming_the_field) {
  auto ck = golden_checkpoint("tiny-dense");  // 2 layers
  auto make = [&](parallel_config p) { parallel_runner r(*ck, 4, 16, dtype::f32, {}, std::move(p)); };
  expect_error([&] { make(stages(3)); }, errc::invalid_argument, "pipeline_parallel_size 3 is more than the model's 2 layers");
  expect_error([&] { make(stages(0)); }, errc::invalid_argument, "pipeline_parallel_size must be >= 1");
  expect_error([&] { make(stages(2, {2})); }, errc::invalid_argument, "pipeline_layers has 1 counts");
  expect_error([&] { make(stages(2, {1, 2})); }, errc::invalid_argument, "adds up to 3 layers; the model has 2");
  expect_error([&] { make(stages(2, {0, 2})); }, errc::invalid_argument, "a stage of 0 layers");
  parallel_config few = stages(2, {}, 2);
  few.threads = 3;
  expect_error([&] { make(few); }, errc::invalid_argument, "threads (3) is fewer than pipeline_parallel_size x");
  expect_error([&] { check_parallel(*ck, few); }, errc::invalid_argument, "each stage's every rank needs a thread");
  BOOST_TEST((parse_pipeline_layers("10,8,10", "--pipeline-layers") == std::vector<int64_t>{10, 8, 10}));
  BOOST_TEST(parse_pipeline_layers("", "--pipeline-layers").empty());
  for (const char* bad : {"1,,2", "a", "-1", "1,", "0", "3 ,1"})
    expect_error([&] { parse_pipeline_layers(bad, "--pipeline-layers"); }, errc::invalid_argument,
                 "--pipeline-layers: '" + std::string(bad) + "' is not a comma-separated list");
}

// A bad sequence anywhere in the batch is refused before any stage writes K/V: the valid sequence
// before it leaves no trace in the last stage's pool.
BOOST_AUTO_TEST_CASE(a_bad_batch_is_refused_before_any_stage_runs) {
  auto ck = golden_checkpoint("tiny-dense");
  parallel_runner runner(*ck, 4, 16, dtype::f32, {}, stages(2));
  const auto& last = runner.stage(1).kv().layer(0);
  const size_t floats = static_cast<size_t>(4 * 16 * last.n_kv_heads * last.head_dim);
  const std::vector<float> before(last.k, last.k + floats);
  const std::vector<int32_t> good{1, 2, 3}, bad{1, 99999};
  const std::vector<int32_t> t0{0}, t1{1};
  const std::vector<step_sequence> batch{{0, good, 0, t0, logits_mode::last}, {1, bad, 0, t1, logits_mode::last}};
  step_result r;
  expect_error([&] { runner.step(batch, r); }, errc::out_of_range, "sequence 1");
  BOOST_TEST(std::memcmp(last.k, before.data(), floats * sizeof(float)) == 0);
  // Still usable: the good sequence alone gives the runner-without-stages' bits.
  parallel_runner whole(*ck, 4, 16);
  step_result x, y;
  runner.step(std::span<const step_sequence>(batch.data(), 1), x);
  whole.step(std::span<const step_sequence>(batch.data(), 1), y);
  BOOST_TEST(same_bits(x.logits, y.logits));
}
