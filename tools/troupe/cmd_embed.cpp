// `troupe embed`: the embedding of each prompt (last-token pooling, runtime/engine/embedding.hpp),
// the prompts batched into steps (generator::embed_batch), no server: llama.cpp's llama-embedding.
// The output is OpenAI's embeddings response (what vLLM's /v1/embeddings returns).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tools/troupe/command.hpp"
#include "tools/troupe/ids_flag.hpp"
#include "tools/troupe/model_flags.hpp"

namespace {

using namespace troupe;

int run_embed(int argc, char** argv) {
  CLI::App app{"Print the embedding of each prompt: its last token's final hidden state (no server)", "troupe embed"};
  std::string model, input_file, instruct;
  std::vector<std::string> prompts, id_lists;
  embedding_options eo;
  bool no_normalize = false;
  int32_t step_tokens = generator::kEmbedStepTokens;
  app.add_option("--model", model, "Hugging Face Qwen3 checkpoint directory")->required();
  auto* prompt_opt = app.add_option("--prompt", prompts, "a text to embed (repeatable; needs the model's tokenizer.json)");
  auto* file_opt = app.add_option("--input-file", input_file, "texts to embed, one a line (after any --prompt)");
  app.add_option("--ids", id_lists, "a prompt as comma-separated token ids (repeatable)")->excludes(prompt_opt)->excludes(file_opt);
  app.add_option("--instruct", instruct,
                 "a task for queries (Qwen3-Embedding's instruction): each text becomes "
                 "\"Instruct: TASK\\nQuery:TEXT\"; documents are embedded without one");
  app.add_option("--dimensions", eo.dimensions,
                 "keep the first N values (Matryoshka models such as Qwen3-Embedding), then normalize; 0 = all");
  app.add_flag("--no-normalize", no_normalize, "print the hidden state as it is, not scaled to unit length");
  app.add_option("--max-num-batched-tokens", step_tokens,
                 "prompt tokens a step: whole prompts share steps up to this many, a longer one runs in chunks")
      ->check(CLI::Range(1, 1 << 20));
  cli::model_flags model_flags;
  model_flags.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  eo.normalize = !no_normalize;
  if (!input_file.empty()) {
    std::ifstream in(input_file);
    if (!in) throw_error(errc::io_error, "--input-file: cannot read " + input_file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) prompts.push_back(std::move(line));
    }
    if (prompts.empty()) throw_error(errc::invalid_argument, "--input-file: " + input_file + " has no text lines");
  }
  if (prompts.empty() && id_lists.empty())
    throw_error(errc::invalid_argument, "give --prompt TEXT, --input-file FILE or --ids 1,2,3");
  if (!instruct.empty() && prompts.empty()) throw_error(errc::invalid_argument, "--instruct applies to text prompts, not --ids");
  // The model card's query form (no space after "Query:").
  if (!instruct.empty())
    for (auto& p : prompts) p = "Instruct: " + instruct + "\nQuery:" + p;
  const auto m = model_flags.load(model);
  std::vector<std::vector<int32_t>> inputs;
  if (!prompts.empty()) {
    tokenizer tok(model);
    // With the tokenizer's special tokens, as sentence-transformers and vLLM encode: Qwen3-Embedding's
    // template appends <|endoftext|>, whose state is the embedding it was trained to give.
    for (const auto& p : prompts) inputs.push_back(tok.encode_with_special_tokens(p));
  } else {
    for (const auto& text : id_lists) inputs.push_back(cli::parse_ids(text));
  }
  generator gen(*m.ck, m.parallel, m.engines);
  generate_options run = m.run_options();
  run.prefill_chunk = step_tokens;
  for (size_t i = 0; i < inputs.size(); ++i)
    cli::check_ids_in_vocab(inputs[i], m.ck->config.vocab_size, "input " + std::to_string(i));
  const auto embeddings = gen.embed_batch(inputs, eo, run);
  nlohmann::json data = nlohmann::json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", embeddings[i]}});
    tokens += static_cast<int64_t>(inputs[i].size());
  }
  const nlohmann::json out = {{"object", "list"},
                              {"model", model},
                              {"data", std::move(data)},
                              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

TROUPE_COMMAND("embed", "print the embedding of each prompt (last-token pooling)", run_embed);
