// Embeddings of many short texts: one prompt a step (what a loop over generator::embed does)
// against whole prompts sharing steps (generator::embed_batch, what `troupe embed` runs), for a
// few prompt lengths, in one run: prompts/s each way and the ratio. Short prompts read all the
// weights for a few tokens each; batched, one read serves the whole step.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/engine/generator.hpp"
#include "runtime/model/checkpoint.hpp"

using namespace troupe;
using clk = std::chrono::steady_clock;

int main(int argc, char** argv) {
  CLI::App app{"Troupe embedding throughput: one prompt a step against batched steps"};
  std::string model;
  int prompts = 32;
  std::vector<int> lengths{4, 16, 64};
  app.add_option("--model", model, "checkpoint directory (e.g. made by troupe make-checkpoint --preset qwen3-0.6b)")->required();
  app.add_option("--prompts", prompts, "prompts embedded each way");
  app.add_option("--lengths", lengths, "prompt lengths in tokens, each measured")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  auto ck = load_checkpoint(model);
  generator gen(*ck);
  std::mt19937 rng(1);
  std::printf("model %s, %d prompts each way, default step budget %d tokens\n", model.c_str(), prompts,
              generator::kEmbedStepTokens);
  std::printf("%8s %18s %18s %8s\n", "tokens", "one a step (p/s)", "batched (p/s)", "ratio");
  for (const int len : lengths) {
    std::vector<std::vector<int32_t>> ps(static_cast<size_t>(prompts), std::vector<int32_t>(static_cast<size_t>(len)));
    for (auto& p : ps)
      for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(ck->config.vocab_size));
    gen.embed(ps[0], {});  // warm: weights paged in
    auto t0 = clk::now();
    for (const auto& p : ps) gen.embed(p, {});
    const double one = std::chrono::duration<double>(clk::now() - t0).count();
    t0 = clk::now();
    gen.embed_batch(ps, {});
    const double batched = std::chrono::duration<double>(clk::now() - t0).count();
    std::printf("%8d %18.1f %18.1f %7.2fx\n", len, prompts / one, prompts / batched, one / batched);
    std::fflush(stdout);
  }
}
