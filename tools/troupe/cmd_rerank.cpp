// `troupe rerank`: how relevant each document is to a query, as Qwen3-Reranker is used
// (runtime/serve/rerank.hpp: the model card's prompt, P(yes) over "yes" and "no" at its last
// token), no server: llama.cpp's llama-embedding --pooling rank. The output is vLLM's /v1/rerank
// response, scores as float32 as the server sends them, best first.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/serve/rerank.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tools/troupe/command.hpp"
#include "tools/troupe/model_flags.hpp"

namespace {

using namespace troupe;

int run_rerank(int argc, char** argv) {
  CLI::App app{"Score each document's relevance to a query, as Qwen3-Reranker answers (no server)", "troupe rerank"};
  std::string model, query, instruction(serve::kDefaultRerankInstruction);
  std::vector<std::string> documents;
  int32_t top_n = 0;
  app.add_option("--model", model, "Hugging Face Qwen3 checkpoint directory, with its tokenizer (a Qwen3-Reranker)")->required();
  app.add_option("--query", query, "the query")->required();
  app.add_option("--document", documents, "a document to score (repeatable)")->required();
  app.add_option("--instruction", instruction, "the task (the prompt's <Instruct>; default: the model card's)");
  app.add_option("--top-n", top_n, "print the best N only (0 = all)")->check(CLI::NonNegativeNumber);
  cli::model_flags model_flags;
  model_flags.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (query.empty()) throw_error(errc::invalid_argument, "--query must not be empty");
  for (size_t i = 0; i < documents.size(); ++i)
    if (documents[i].empty()) throw_error(errc::invalid_argument, "--document " + std::to_string(i) + " is empty");
  const auto m = model_flags.load(model);
  const tokenizer tok(model);
  // A causal LM scores by "yes" against "no", a sequence classifier of one label by its own logit.
  const auto yes_no = serve::rerank_tokens_for(tok, m.ck->config.vocab_size, m.ck->config.num_labels, model);
  generator gen(*m.ck, m.parallel, m.engines);
  std::vector<double> scores;
  int64_t tokens = 0;
  for (const auto& d : documents) {
    const auto prompt = serve::rerank_prompt(tok, instruction, query, d);
    tokens += static_cast<int64_t>(prompt.size());
    scores.push_back(static_cast<float>(serve::rerank_score(gen.last_logits(prompt, m.run_options()), yes_no)));
  }
  std::vector<size_t> order(documents.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (top_n > 0 && order.size() > static_cast<size_t>(top_n)) order.resize(static_cast<size_t>(top_n));
  nlohmann::json results = nlohmann::json::array();
  for (size_t i : order)
    results.push_back({{"index", i}, {"document", {{"text", documents[i]}}}, {"relevance_score", scores[i]}});
  const nlohmann::json out = {{"model", model}, {"usage", {{"total_tokens", tokens}}}, {"results", std::move(results)}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

TROUPE_COMMAND("rerank", "score documents against a query as Qwen3-Reranker (no server)", run_rerank);
