// Serving on the CUDA runner: the scheduler and batch executor of `troupe serve --device cuda`
// (the actors only move their messages) on golden checkpoints. Every golden prompt at once with
// chunked prefill, then a pool too small for them all (preemption), each answer the reference's
// greedy continuation; two device replicas sharing blocks through a store (the second loads the
// prompts' whole blocks instead of computing them and still answers exactly). The same scenarios
// run on the CPU engine on any machine; device cases are skipped without a device (device_test.hpp).
#define BOOST_TEST_MODULE troupe_serve_cuda
#include <boost/test/unit_test.hpp>
#include <boost/test/data/test_case.hpp>

#include <functional>
#include <map>
#include <string>

#include "tests/runtime/engine/cuda/device_test.hpp"  // before golden.hpp: TROUPE_TEST_DATA_DIR
#include "runtime/prefix/memory_kv_store.hpp"
#include "runtime/serve/cuda/cuda_step_backend.hpp"
#include "tests/runtime/engine/golden.hpp"
#include "tests/runtime/serve/replica.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

const char* kSets[] = {"tiny-dense", "tiny-untied-sharded", "e2e-full-vocab"};

std::shared_ptr<const checkpoint> load(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const checkpoint>> cache;
  auto& c = cache[name];
  if (!c) c = load_checkpoint(golden_dir(name));
  return c;
}

sched::sched_config config(int32_t budget, bool prefix = false) {
  sched::sched_config c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 256;
  c.enable_prefix_caching = prefix;
  c.prefix_identity.model_fingerprint = "golden";
  c.prefix_identity.arithmetic = "cuda";
  c.prefix_options.remote = prefix;
  return c;
}

// Every golden case as a request for its reference continuation.
std::vector<golden_case> add_all(replica& r, const std::string& set) {
  auto cases = load_golden(set);
  for (size_t i = 0; i < cases.size(); ++i)
    r.add(static_cast<int64_t>(i), {cases[i].prompt, static_cast<int32_t>(cases[i].greedy.size())});
  return cases;
}

void check_answers(replica& r, const std::vector<golden_case>& cases, const std::string& what) {
  for (size_t i = 0; i < cases.size(); ++i)
    BOOST_TEST(r.out[static_cast<int64_t>(i)] == cases[i].greedy, what << " " << cases[i].id);
}

// A backend of `blocks` blocks of 16 tokens for the checkpoint.
using make_backend = std::function<std::unique_ptr<serve::step_backend>(std::shared_ptr<const checkpoint>, int32_t)>;

// A 16-token budget: long prompts are prefilled in chunks beside the others' decodes.
void serve_together(const std::string& set, const make_backend& make) {
  auto ck = load(set);
  replica r(make(ck, 128), config(16), 16);
  const auto cases = add_all(r, set);
  r.run();
  check_answers(r, cases, set);
}

void serve_in_a_small_pool(const std::string& set, const make_backend& make) {
  auto ck = load(set);
  auto cases = load_golden(set);
  int32_t longest = 0;
  for (const auto& c : cases) longest = std::max(longest, static_cast<int32_t>((c.prompt.size() + c.greedy.size() + 15) / 16));
  auto c = config(64);
  c.max_model_len = longest * 16;
  replica r(make(ck, longest + 1), c, 16);
  add_all(r, set);
  r.run();
  check_answers(r, cases, set);
  BOOST_TEST(r.s.stats().num_preemptions > 0, set << ": no preemption in a pool of " << longest + 1 << " blocks");
}

void serve_on_two_replicas(const std::string& set, const make_backend& make) {
  auto ck = load(set);
  prefix::memory_kv_store store;
  prefix::cost_model cost;
  const auto id = config(64, true).prefix_identity;
  replica a(make(ck, 128), config(64, true), 16);
  replica b(make(ck, 128), config(64, true), 16);
  for (auto* r : {&a, &b}) {
    prefix::block_codec codec(id.key_component(), r->ex.kv_layout());
    r->remote = std::make_unique<prefix::remote_cache>(store, codec, id, prefix::remote_options{}, cost);
  }
  const auto cases = add_all(a, set);
  a.run();
  check_answers(a, cases, set + std::string(" (first replica)"));
  BOOST_TEST(store.size() > 0u);
  add_all(b, set);
  b.run();
  check_answers(b, cases, set + std::string(" (second replica)"));
  int64_t reused = 0;
  for (const auto& [seq, n] : b.cached) reused += n;
  BOOST_TEST(reused > 0);
  BOOST_TEST(b.remote->stats().blocks_fetched > 0);
  BOOST_TEST(b.remote->stats().rejected_total() == 0);
}

std::unique_ptr<serve::step_backend> on_cuda(std::shared_ptr<const checkpoint> ck, int32_t blocks) {
  return serve::make_cuda_backend(*ck, blocks, 16);
}

}  // namespace

// The scenarios themselves on the CPU engine (any machine): each holds there (the prompts do
// preempt in the small pool, the second replica does fetch), so on the device only the backend differs.
BOOST_DATA_TEST_CASE(the_scenarios_hold_on_the_cpu_engine, boost::unit_test::data::make(kSets), set) {
  const make_backend cpu = [](std::shared_ptr<const checkpoint> ck, int32_t blocks) {
    return serve::make_cpu_backend(std::move(ck), blocks, 16);
  };
  serve_together(set, cpu);
  serve_in_a_small_pool(set, cpu);
  serve_on_two_replicas(set, cpu);
}

BOOST_DATA_TEST_CASE(golden_prompts_served_together_get_their_greedy_continuations, boost::unit_test::data::make(kSets),
                     set) {
  require_device();
  serve_together(set, on_cuda);
}

BOOST_DATA_TEST_CASE(a_pool_too_small_for_all_preempts_and_answers_exactly, boost::unit_test::data::make(kSets), set) {
  require_device();
  serve_in_a_small_pool(set, on_cuda);
}

BOOST_DATA_TEST_CASE(a_second_device_replica_reuses_the_first_ones_blocks, boost::unit_test::data::make(kSets), set) {
  require_device();
  serve_on_two_replicas(set, on_cuda);
}
