// The generator on an engine it is given (step_engine_factory: what `troupe generate --device cuda`
// passes): every request makes one engine of the pool size it needs and runs all its steps there,
// so a stand-in engine over the CPU runner gives the default path's ids, logits and embeddings
// bit for bit; a LoRA adapter, which only the CPU engine applies, is refused.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <vector>

#include "runtime/engine/generator.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/step_engine.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "tests/runtime/engine/expect_error.hpp"
#include "tests/runtime/engine/golden.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// model_runner over a pool of its own, counting its steps.
class counting_engine final : public step_engine {
 public:
  counting_engine(const checkpoint& ck, int32_t blocks, int32_t block_size, int& steps)
      : kv_(ck.config, blocks, block_size), runner_(ck, kv_), steps_(steps) {}
  void step(std::span<const step_sequence> batch, step_result& out) override {
    ++steps_;
    runner_.step(batch, out);
  }
  int32_t num_blocks() const noexcept override { return kv_.num_blocks(); }

 private:
  kv_cache kv_;
  model_runner runner_;
  int& steps_;
};

struct factory_log {
  int made = 0, steps = 0;
  std::vector<int32_t> blocks;
};

step_engine_factory counting_factory(const checkpoint& ck, factory_log& log) {
  return [&ck, &log](int32_t blocks, int32_t block_size) -> std::unique_ptr<step_engine> {
    ++log.made;
    log.blocks.push_back(blocks);
    BOOST_TEST(block_size == 16);
    return std::make_unique<counting_engine>(ck, blocks, block_size, log.steps);
  };
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_generator_runs_every_step_on_the_engine_it_is_given) {
  auto ck = load_checkpoint(golden_dir("tiny-dense"));
  const auto c = load_golden("tiny-dense").back();
  generator cpu(*ck);
  factory_log log;
  generator given(*ck, {}, counting_factory(*ck, log));

  generate_options o;
  o.max_tokens = 6;
  o.sampling.temperature = 0;
  o.sampling.ignore_eos = true;
  o.prefill_chunk = 5;
  const auto want = cpu.generate(c.prompt, o);
  const auto got = given.generate(c.prompt, o);
  BOOST_TEST(got.ids == want.ids, boost::test_tools::per_element());
  BOOST_TEST(log.made == 1);
  BOOST_TEST(log.blocks.back() == static_cast<int32_t>((c.prompt.size() + 6 + 15) / 16));
  const int prefill_steps = static_cast<int>((c.prompt.size() + 4) / 5);
  BOOST_TEST(log.steps == prefill_steps + 5);  // 6 tokens: the prompt's steps, then 5 decode steps

  const auto logits = given.prompt_logits(c.prompt);
  BOOST_TEST(logits == cpu.prompt_logits(c.prompt));
  BOOST_TEST(log.made == 2);
  // The last row alone (a reranker's read) is prompt_logits' last row, bit for bit.
  const auto vocab = static_cast<size_t>(ck->config.vocab_size);
  const auto last = given.last_logits(c.prompt);
  BOOST_TEST(last == std::vector<float>(logits.end() - static_cast<std::ptrdiff_t>(vocab), logits.end()));
  BOOST_TEST(log.made == 3);

  const std::vector<std::vector<int32_t>> prompts = {c.prompt, {1, 2, 3}};
  const auto e = given.embed_batch(prompts, embedding_options{});
  const auto w = cpu.embed_batch(prompts, embedding_options{});
  BOOST_TEST(e == w);
  BOOST_TEST(log.made == 4);

  // The engine's own failure reaches the caller as it is.
  generator failing(*ck, {}, [](int32_t, int32_t) -> std::unique_ptr<step_engine> {
    throw_error(errc::unsupported, "cuda_model_runner: no CUDA device");
  });
  expect_error([&] { failing.generate(c.prompt, o); }, errc::unsupported, "no CUDA device");
}

BOOST_AUTO_TEST_CASE(a_lora_adapter_is_refused_on_a_given_engine) {
  auto ck = load_checkpoint(golden_dir("tiny-dense-lora"));
  factory_log log;
  generator given(*ck, {}, counting_factory(*ck, log));
  generate_options o;
  o.max_tokens = 2;
  o.adapter = std::make_shared<lora_adapter>(load_lora_adapter(golden_dir("tiny-dense-lora") + "/adapter", ck->config));
  expect_error([&] { given.generate({1, 2, 3}, o); }, errc::unsupported, "LoRA adapters run on the CPU engine only");
  BOOST_TEST(log.steps == 0);
}
