// `troupe make-checkpoint`: writes a random-weight Qwen3 checkpoint of a real shape in the Hugging
// Face layout, then loads it back (the same checks as any model) and reports the load time.
#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/random_checkpoint.hpp"
#include "tools/troupe/command.hpp"

namespace {

int make_checkpoint(int argc, char** argv) {
  using clock = std::chrono::steady_clock;
  CLI::App app{"Write a random-weight Qwen3 checkpoint (config, generation_config, safetensors, "
               "tokenizer files) in the Hugging Face format",
               "troupe make-checkpoint"};
  std::string out, preset, dtype_name = "bf16", tokenizer;
  uint64_t seed = 0;
  int64_t num_layers = 0, num_labels = 0;
  bool force = false, no_verify = false;
  app.add_option("--out", out, "Checkpoint directory to create")->required();
  app.add_option("--preset", preset, "Model shape")
      ->required()
      ->check(CLI::IsMember(troupe::random_checkpoint_presets()));
  app.add_option("--num-layers", num_layers,
                 "keep the preset's layer shape with this many layers (a slice of a model too large for this "
                 "machine, for benchmarks; default: the preset's count)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  app.add_option("--num-labels", num_labels,
                 "write a sequence classifier (Qwen3ForSequenceClassification: a score head of this many labels, "
                 "LABEL_0..) instead of a causal LM")
      ->check(CLI::Range(int64_t{1}, troupe::max_num_labels));
  app.add_option("--seed", seed, "Weights are a function of the seed (default 0)");
  app.add_option("--dtype", dtype_name, "Weight dtype (default bf16)")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  app.add_option("--tokenizer", tokenizer,
                 "Directory with tokenizer.json to copy (default: the Qwen3 tokenizer shipped with Troupe)");
  app.add_flag("--force", force, "Replace an existing checkpoint directory");
  app.add_flag("--no-verify", no_verify, "Skip loading the result back");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  troupe::random_checkpoint_options opt;
  opt.seed = seed;
  opt.weight_type = dtype_name == "f32" ? troupe::dtype::f32
                    : dtype_name == "f16" ? troupe::dtype::f16
                                          : troupe::dtype::bf16;
  opt.tokenizer_dir = tokenizer;
  opt.force = force;
  troupe::model_config config = troupe::preset_config(preset);
  if (num_layers > 0) config.num_hidden_layers = num_layers;
  if (num_labels > 0) troupe::make_classifier(config, num_labels);
  auto t0 = clock::now();
  auto summary =
      troupe::write_random_checkpoint(out, config, troupe::qwen3_generation_defaults(), opt);
  double write_s = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("wrote %s: %s preset, %s, %.1fM parameters, %.3f GB %s, seed %llu, in %.2f s\n",
              out.c_str(), preset.c_str(), troupe::model_class_name(config).c_str(),
              static_cast<double>(summary.num_parameters) / 1e6,
              static_cast<double>(summary.weight_bytes) / 1e9, dtype_name.c_str(),
              static_cast<unsigned long long>(seed), write_s);
  if (!no_verify) {
    auto t1 = clock::now();
    auto ck = troupe::load_checkpoint(out);
    double load_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
    std::printf("loaded back in %.1f ms: %zu weight bytes per token, fingerprint %s\n", load_ms,
                ck->weights.bytes, troupe::model_fingerprint(*ck).c_str());
  }
  return 0;
}

}  // namespace

TROUPE_COMMAND("make-checkpoint", "write a random-weight Qwen3 checkpoint of a real shape",
               make_checkpoint);
