// What prompt-lookup drafting (runtime/sched/ngram_proposer) costs the scheduler per step: one
// proposal per decoding sequence, over contexts of growing length, for the worst case (random
// tokens: the last token rarely recurs, every position is looked at) and a looping text (a match
// at once). Prints milliseconds for 64 sequences, the most a default step plans.
//
//   build/bench/sched/ngram_bench
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/sched/ngram_proposer.hpp"

namespace {

double ms_for_64(const std::vector<int32_t>& tokens, const troupe::sched::ngram_options& opt, size_t& drafts) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int seq = 0; seq < 64; ++seq) drafts += troupe::sched::propose_ngram_drafts(tokens, opt, 4).size();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  const troupe::sched::ngram_options opt{4, 2, 4};
  std::mt19937 rng(1);
  std::printf("prompt-lookup proposals for 64 sequences (num_tokens 4, n 2..4), best of 5:\n");
  std::printf("  %10s %18s %18s\n", "context", "random text ms", "looping text ms");
  size_t drafts = 0;
  for (int len : {1024, 4096, 32768, 131072}) {
    std::vector<int32_t> random(static_cast<size_t>(len)), looping(static_cast<size_t>(len));
    for (auto& x : random) x = static_cast<int32_t>(rng() % 151936);
    for (int i = 0; i < len; ++i) looping[static_cast<size_t>(i)] = 1000 + i % 37;
    const double r = ms_for_64(random, opt, drafts), l = ms_for_64(looping, opt, drafts);
    std::printf("  %10d %18.3f %18.3f\n", len, r, l);
  }
  std::printf("(%zu drafts proposed in all)\n", drafts);
  return 0;
}
