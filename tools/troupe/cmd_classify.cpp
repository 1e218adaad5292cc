// `troupe classify`: a sequence classifier's label probabilities for each input text or token-id
// list (Qwen3ForSequenceClassification, docs/checkpoints.md), no server. The output is vLLM's /classify
// response: probabilities as float32 as the server sends them, the likeliest label by name.
#include <CLI/CLI.hpp>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/serve/rerank.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tools/troupe/command.hpp"
#include "tools/troupe/ids_flag.hpp"
#include "tools/troupe/model_flags.hpp"

namespace {

using namespace troupe;

int run_classify(int argc, char** argv) {
  CLI::App app{"Classify texts with a sequence classifier: each label's probability (no server)", "troupe classify"};
  std::string model;
  std::vector<std::string> inputs, id_lists;
  app.add_option("--model", model, "a Qwen3ForSequenceClassification checkpoint directory (with its tokenizer for --input)")
      ->required();
  auto* input_opt = app.add_option("--input", inputs, "a text to classify (repeatable)");
  app.add_option("--ids", id_lists, "an input as comma-separated token ids (repeatable; no tokenizer needed)")
      ->excludes(input_opt);
  cli::model_flags model_flags;
  model_flags.add_to(app);
  CLI11_PARSE(app, argc, argv);  // returns app.exit(e) on a parse error (--help included)
  if (inputs.empty() && id_lists.empty()) throw_error(errc::invalid_argument, "give --input TEXT or --ids 1,2,3 (repeatable)");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].empty()) throw_error(errc::invalid_argument, "--input " + std::to_string(i) + " is empty");
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& text : id_lists) prompts.push_back(cli::parse_ids(text));  // before the weights are read
  const auto m = model_flags.load(model);
  const auto& c = m.ck->config;
  if (c.num_labels == 0)
    throw_error(errc::unsupported, model + " is not a sequence classifier (" + model_class_name(c) +
                                       "): classify needs a Qwen3ForSequenceClassification checkpoint (a score head)");
  for (const auto& ids : prompts) cli::check_ids_in_vocab(ids, c.vocab_size);
  if (!inputs.empty()) {
    const tokenizer tok(model);
    for (const auto& text : inputs) prompts.push_back(tok.encode_with_special_tokens(text));
  }
  generator gen(*m.ck, m.parallel, m.engines);
  nlohmann::json data = nlohmann::json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    tokens += static_cast<int64_t>(prompt.size());
    const auto probs = serve::label_probs(gen.last_logits(prompt, m.run_options()));
    data.push_back({{"index", i},
                    {"label", c.labels[serve::likeliest_label(probs)]},
                    {"probs", probs},
                    {"num_classes", probs.size()}});
  }
  const nlohmann::json out = {{"object", "list"},
                              {"model", model},
                              {"data", std::move(data)},
                              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}, {"completion_tokens", 0}}}};
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

TROUPE_COMMAND("classify", "label probabilities of texts from a sequence classifier (no server)", run_classify);
