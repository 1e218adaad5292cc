// `troupe generate` and `troupe logits`: one request through the engine, no server.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/engine/generator.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/sched/ngram_proposer.hpp"
#include "runtime/grammar/automaton.hpp"
#include "runtime/serve/output_text.hpp"
#include "runtime/serve/structured_output.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tools/troupe/command.hpp"
#include "tools/troupe/structured_flags.hpp"

namespace {

using namespace troupe;

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
      throw_error(errc::invalid_argument, "--ids: '" + item + "' is not a token id (expected e.g. --ids 1,2,3)");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw_error(errc::invalid_argument, "--ids: no token ids given");
  return ids;
}

void check_vocab(const std::vector<int32_t>& ids, const model_config& cfg) {
  for (int32_t id : ids)
    if (id >= cfg.vocab_size)
      throw_error(errc::out_of_range, "--ids: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                          std::to_string(cfg.vocab_size) + ")");
}

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate a completion for one prompt (no server)", "troupe generate"};
  std::string model, ids_text, prompt_text;
  int32_t max_tokens = 64, prefill_chunk = 0, speculative_tokens = 0;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  float presence = 0, frequency = 0;
  std::optional<uint64_t> seed;
  bool json = false, ignore_eos = false;
  app.add_option("--model", model, "Hugging Face Qwen3 checkpoint directory")->required();
  auto* prompt_opt = app.add_option("--prompt", prompt_text, "prompt text (needs the model's tokenizer.json)");
  app.add_option("--ids", ids_text, "prompt as comma-separated token ids")->excludes(prompt_opt);
  app.add_option("--max-tokens", max_tokens, "tokens to generate");
  app.add_option("--temperature", temperature, "0 = greedy (default from generation_config.json)");
  app.add_option("--top-p", top_p);
  app.add_option("--top-k", top_k);
  app.add_option("--min-p", min_p);
  app.add_option("--repetition-penalty", repetition_penalty);
  app.add_option("--presence-penalty", presence);
  app.add_option("--frequency-penalty", frequency);
  app.add_option("--seed", seed, "sampling seed (same seed, same tokens)");
  app.add_option("--prefill-chunk", prefill_chunk, "prefill the prompt in chunks of N tokens (0 = one step)");
  app.add_flag("--ignore-eos", ignore_eos, "do not stop at the end-of-sequence ids");
  app.add_option("--speculative-tokens", speculative_tokens,
                 "prompt-lookup drafts per decode step, verified in the step: the same ids, fewer steps where the "
                 "text repeats (docs/speculative.md)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--json", json, "print {\"ids\": [...]} instead of the ids as text");
  std::string quantization = "none", kv_dtype = "auto";
  app.add_option("--quantization", quantization, "quantize float weights on load: none, int8, fp8 (docs/quantization.md)");
  app.add_option("--kv-cache-dtype", kv_dtype, "KV cache element type: auto (float32), int8, fp8");
  bool no_mmap = false;
  std::string rope_scaling;
  app.add_option("--rope-scaling", rope_scaling,
                 "replace config.json's rope_scaling, e.g. '{\"rope_type\":\"yarn\",\"factor\":4.0,"
                 "\"original_max_position_embeddings\":32768}' for Qwen3 at 131072 tokens (docs/engine.md)");
  app.add_flag("--no-mmap", no_mmap,
               "read the weights into memory on 2 MB pages instead of mapping the files: a slower load, "
               "faster decode (docs/engine.md)");
  std::string compute = "f32";
  app.add_option("--compute-dtype", compute, "matmul arithmetic for BF16 weights: f32 (exact) or bf16 (bf16 activations, vdpbf16ps; docs/engine.md)");
  std::string lora;
  app.add_option("--lora", lora, "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors; docs/lora.md)");
  cli::structured_flags structured_flags;
  structured_flags.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const wire::structured_output structured = structured_flags.value();

  if (prompt_text.empty() && ids_text.empty())
    throw_error(errc::invalid_argument, "give the prompt as --prompt TEXT or --ids 1,2,3");
  quant::load_options lo;
  lo.quantization = quant::parse_method(quantization, "--quantization");
  if (no_mmap) lo.weights = residency::huge_pages;
  lo.rope_scaling = rope_scaling;
  const dtype kv_type = parse_kv_cache_dtype(kv_dtype);
  const kernels::compute_dtype compute_type = parse_compute_dtype(compute);
  auto ck = quant::load_model(model, lo);
  std::unique_ptr<tokenizer> tok;
  std::vector<int32_t> prompt;
  if (!prompt_text.empty()) {
    tok = std::make_unique<tokenizer>(model);
    prompt = tok->encode(prompt_text);
  } else {
    prompt = parse_ids(ids_text);
  }
  check_vocab(prompt, ck->config);
  generate_options o;
  o.max_tokens = max_tokens;
  o.prefill_chunk = prefill_chunk;
  o.kv_cache_dtype = kv_type;
  o.compute = compute_type;
  if (!lora.empty()) o.adapter = std::make_shared<lora_adapter>(load_lora_adapter(lora, ck->config));
  o.sampling = defaults_from(ck->generation);
  if (temperature) o.sampling.temperature = *temperature;
  if (top_p) o.sampling.top_p = *top_p;
  if (top_k) o.sampling.top_k = *top_k;
  if (min_p) o.sampling.min_p = *min_p;
  if (repetition_penalty) o.sampling.repetition_penalty = *repetition_penalty;
  o.sampling.presence_penalty = presence;
  o.sampling.frequency_penalty = frequency;
  if (seed) {
    o.sampling.seed = *seed;
    o.sampling.has_seed = true;
  }
  o.sampling.ignore_eos = ignore_eos;
  if (structured.k != wire::structured_output::kind::none) {
    // As the server builds it (request_builder.cpp): the grammar over the tokenizer's bytes,
    // ended by the stop ids once complete.
    if (!tok) tok = std::make_unique<tokenizer>(model);
    o.sampling.grammar_end_ids = ignore_eos ? std::vector<int32_t>{} : o.sampling.stop_token_ids;
    if (o.sampling.grammar_end_ids.empty())
      throw_error(errc::invalid_argument, "structured output ends with a stop id once the grammar is complete, and "
                                          "--ignore-eos leaves none");
    o.sampling.grammar = std::make_shared<grammar::automaton>(
        std::make_shared<const grammar::grammar>(grammar::parse_gbnf(serve::structured_output_gbnf(structured))),
        grammar::token_table::from_tokenizer(*tok));
  }

  if (speculative_tokens > 0) {
    sched::ngram_options ngram;  // the server's default suffix lengths
    ngram.num_tokens = speculative_tokens;
    o.propose = [ngram](std::span<const int32_t> context, int32_t max_drafts) {
      return sched::propose_ngram_drafts(context, ngram, max_drafts);
    };
  }

  generator gen(*ck);
  // The server's output text (no stop strings): special tokens and a model's padded vocabulary
  // rows have no text there, so `generate` prints what a client of `troupe serve` receives.
  std::optional<serve::output_text> text;
  if (tok) text.emplace(tok.get(), std::vector<std::string>{});
  std::string full_text;
  auto out = gen.generate(prompt, o, [&](int32_t id) {
    if (text) {
      std::string delta = text->push(id).text;
      full_text += delta;
      if (!json) std::fputs(delta.c_str(), stdout);
    } else if (!json) {
      std::printf("%d ", id);
    }
    std::fflush(stdout);
  });
  if (text) full_text += text->finish();
  if (json) {
    nlohmann::json j{{"ids", out.ids}, {"finish_reason", out.finish_reason}};
    if (text) j["text"] = full_text;
    if (speculative_tokens > 0) {
      j["decode_steps"] = out.decode_steps;
      j["accepted_drafts"] = out.accepted_drafts;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("\n");
  }
  return 0;
}

int run_logits(int argc, char** argv) {
  CLI::App app{"Write the float32 logits of every prompt position", "troupe logits"};
  std::string model, ids_text, out_path;
  int32_t prefill_chunk = 0;
  app.add_option("--model", model, "Hugging Face Qwen3 checkpoint directory")->required();
  app.add_option("--ids", ids_text, "prompt as comma-separated token ids")->required();
  app.add_option("--out", out_path, "output file: little-endian float32 [n_ids, vocab_size]")->required();
  app.add_option("--prefill-chunk", prefill_chunk, "prefill in chunks of N tokens (0 = one step)");
  std::string quantization = "none", kv_dtype = "auto";
  app.add_option("--quantization", quantization, "quantize float weights on load: none, int8, fp8");
  app.add_option("--kv-cache-dtype", kv_dtype, "KV cache element type: auto (float32), int8, fp8");
  bool no_mmap = false;
  std::string rope_scaling;
  app.add_option("--rope-scaling", rope_scaling,
                 "replace config.json's rope_scaling, e.g. '{\"rope_type\":\"yarn\",\"factor\":4.0,"
                 "\"original_max_position_embeddings\":32768}' for Qwen3 at 131072 tokens (docs/engine.md)");
  app.add_flag("--no-mmap", no_mmap,
               "read the weights into memory on 2 MB pages instead of mapping the files: a slower load, "
               "faster decode (docs/engine.md)");
  std::string compute = "f32";
  app.add_option("--compute-dtype", compute, "matmul arithmetic for BF16 weights: f32 (exact) or bf16 (bf16 activations, vdpbf16ps; docs/engine.md)");
  std::string lora;
  app.add_option("--lora", lora, "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors; docs/lora.md)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  quant::load_options lo;
  lo.quantization = quant::parse_method(quantization, "--quantization");
  if (no_mmap) lo.weights = residency::huge_pages;
  lo.rope_scaling = rope_scaling;
  const dtype kv_type = parse_kv_cache_dtype(kv_dtype);
  const kernels::compute_dtype compute_type = parse_compute_dtype(compute);
  auto ck = quant::load_model(model, lo);
  auto prompt = parse_ids(ids_text);
  check_vocab(prompt, ck->config);
  std::shared_ptr<const lora_adapter> adapter;
  if (!lora.empty()) adapter = std::make_shared<lora_adapter>(load_lora_adapter(lora, ck->config));
  generator gen(*ck);
  auto logits = gen.prompt_logits(prompt, prefill_chunk, kv_type, compute_type, adapter);
  std::ofstream f(out_path, std::ios::binary);
  if (!f) throw_error(errc::io_error, "cannot write " + out_path);
  f.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!f) throw_error(errc::io_error, "short write to " + out_path);
  return 0;
}

}  // namespace

TROUPE_COMMAND("generate", "generate a completion for one prompt", run_generate);
TROUPE_COMMAND("logits", "write the logits of every prompt position", run_logits);
