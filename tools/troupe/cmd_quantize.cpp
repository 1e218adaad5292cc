// `troupe quantize`: writes a quantized copy of a float Qwen3 checkpoint in the Hugging Face
// layout (INT8: Troupe's troupe_int8; FP8: Qwen's block-wise format), or rewrites a GPTQ / AWQ one in
// Troupe's INT8 layout (its own codes and group size, loaded in place from then on), then loads it
// back as any model would (without quantizing again) and reports sizes and times.
#include <chrono>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/core/error.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/quant/write.hpp"
#include "tools/troupe/command.hpp"

namespace {

using namespace troupe;

int run_quantize(int argc, char** argv) {
  using clock = std::chrono::steady_clock;
  CLI::App app{"Write a quantized copy (INT8 or FP8 weights) of a float Qwen3 checkpoint", "troupe quantize"};
  std::string model, out, method_text;
  int32_t group_size = 128;
  bool keep_lm_head = false, force = false;
  app.add_option("--model", model,
                 "Float (BF16 / F16 / F32) Hugging Face Qwen3 checkpoint directory, or a GPTQ / AWQ one (with --method int8)")
      ->required();
  app.add_option("--out", out, "Directory to create")->required();
  app.add_option("--method", method_text, "int8 (per-group scales, Troupe's format) or fp8 (Qwen's block-wise E4M3)")
      ->required()
      ->check(CLI::IsMember({"int8", "fp8"}));
  app.add_option("--group-size", group_size,
                 "INT8: input columns per scale, a power of two in [32, 4096]; 0 = per output channel (a GPTQ / AWQ model keeps its own)");
  app.add_flag("--keep-lm-head", keep_lm_head, "INT8: leave the output projection in its float dtype");
  app.add_flag("--force", force, "Replace an existing checkpoint directory");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  quant::load_options o;
  o.quantization = quant::parse_method(method_text, "--method");
  o.group_size = group_size;
  if (keep_lm_head) o.quantize_lm_head = false;
  o.release_source_pages = false;  // the writer copies the float tensors it keeps from these pages
  const auto t0 = clock::now();
  auto ck = quant::load_model(model, o);  // float: quantized here; GPTQ / AWQ: their codes, as loaded
  const double quantize_s = std::chrono::duration<double>(clock::now() - t0).count();
  const auto summary = quant::write_quantized_checkpoint(*ck, model, out, force);
  const double write_s = std::chrono::duration<double>(clock::now() - t0).count() - quantize_s;
  const auto t1 = clock::now();
  auto back = quant::load_model(out);
  const double load_s = std::chrono::duration<double>(clock::now() - t1).count();
  std::printf("wrote %s: %s, %lld tensors quantized, %.3f GB of weights (%.3f GB read per token), quantized in %.2f s, "
              "written in %.2f s, loaded back in %.3f s\n",
              out.c_str(), method_text.c_str(), static_cast<long long>(summary.quantized_tensors),
              static_cast<double>(summary.weight_bytes) / 1e9, static_cast<double>(back->weights.bytes) / 1e9, quantize_s,
              write_s, load_s);
  return 0;
}

}  // namespace

TROUPE_COMMAND("quantize", "write an INT8 or FP8 copy of a float checkpoint", run_quantize);
