#include "tools/troupe/model_flags.hpp"

#include <omp.h>

#include "runtime/engine/model_runner.hpp"
#include "runtime/core/error.hpp"
#include "runtime/kv/kv_cache.hpp"
#include "runtime/model/shard.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/serve/cuda_limits.hpp"
#ifdef TROUPE_HAVE_CUDA_SERVE
#include "runtime/serve/cuda/cuda_step_backend.hpp"
#endif

namespace troupe::cli {

void model_flags::add_to(CLI::App& app) {
  app.add_option("--quantization", quantization, "quantize float weights on load: none, int8, fp8 (docs/quantization.md)");
  app.add_option("--kv-cache-dtype", kv_dtype, "KV cache element type: auto (float32), int8, fp8");
  app.add_option("--rope-scaling", rope_scaling,
                 "replace config.json's rope_scaling, e.g. '{\"rope_type\":\"yarn\",\"factor\":4.0,"
                 "\"original_max_position_embeddings\":32768}' for Qwen3 at 131072 tokens (docs/engine.md)");
  app.add_option("--generation-config", generation_config,
                 "default sampling from: auto (the model's generation_config.json), vllm (none: temperature 1), or a "
                 "directory holding one");
  app.add_option("--override-generation-config", override_generation_config,
                 "generation_config.json fields over the default sampling's, e.g. '{\"temperature\": 0.5}'");
  app.add_flag("--no-mmap", no_mmap,
               "read the weights into memory on 2 MB pages instead of mapping the files: a slower load, "
               "faster decode (docs/engine.md)");
  app.add_option("--compute-dtype", compute,
                 "matmul arithmetic for BF16 weights: f32 (exact) or bf16 (bf16 activations, vdpbf16ps; docs/engine.md)");
  app.add_option("--lora", lora, "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors; docs/lora.md)");
  app.add_option("--tensor-parallel-size", tensor_parallel_size,
                 "split each step over this many CPU shards, one thread group each (docs/engine.md, "
                 "\"Tensor parallelism\"); default 1");
  app.add_flag("--enable-expert-parallel", expert_parallel,
               "with --tensor-parallel-size: give each shard whole experts of the MoE layers instead of a slice "
               "of every expert (docs/engine.md, \"Expert parallelism\")");
  app.add_option("--pipeline-parallel-size,--pp", pipeline_parallel_size,
                 "split the layers over this many pipeline stages, each holding its layers' KV (docs/engine.md, "
                 "\"Pipeline parallelism\"); default 1");
  app.add_option("--pipeline-layers", pipeline_layers,
                 "with --pipeline-parallel-size: each stage's layer count, first to last, e.g. 10,8,10 (vLLM's "
                 "VLLM_PP_LAYER_PARTITION); default: as even as vLLM's");
  app.add_option("--pipeline-schedule", pipeline_schedule,
                 "with --pipeline-parallel-size: auto, wavefront (stages overlap on parts of each step) or in_turn "
                 "(the stages one after another on every thread); auto: wavefront with a NUMA node per stage");
  app.add_option("--threads", threads,
                 "CPU threads for the model, shared among the shards and stages; default 0: OMP_NUM_THREADS, else every core "
                 "(docs/engine.md, \"Threads\")");
  app.add_option("--device", device,
                 "where the forward step runs: cpu or cuda (one GPU; a build where nvcc was found; docs/cuda.md)");
}

namespace {

// What the CUDA runner does not do, refused by the flag that asks for it (as troupe serve's
// model.device does by config key).
void check_device(const model_flags& f) {
  if (f.device != "cpu" && f.device != "cuda")
    throw_error(errc::invalid_argument, "--device: '" + f.device + "' is not one of cpu, cuda");
  if (f.device == "cpu") return;
  const auto refused = serve::first_cpu_only({f.tensor_parallel_size, parse_kv_cache_dtype(f.kv_dtype), parse_compute_dtype(f.compute),
                                               !f.lora.empty(), quant::parse_method(f.quantization, "--quantization"),
                                               f.pipeline_parallel_size});
  if (refused) {
    std::string flag;
    switch (refused->setting) {
      case serve::cpu_only::tensor_parallel_size: flag = "--tensor-parallel-size " + std::to_string(f.tensor_parallel_size); break;
      case serve::cpu_only::kv_cache_dtype: flag = "--kv-cache-dtype " + f.kv_dtype; break;
      case serve::cpu_only::compute_dtype: flag = "--compute-dtype " + f.compute; break;
      case serve::cpu_only::lora: flag = "--lora"; break;
      case serve::cpu_only::quantization: flag = "--quantization " + f.quantization; break;
      case serve::cpu_only::pipeline_parallel_size: flag = "--pipeline-parallel-size " + std::to_string(f.pipeline_parallel_size); break;
    }
    throw_error(errc::invalid_argument, flag + " (" + refused->why + ") runs on the CPU only; not with --device cuda");
  }
#ifndef TROUPE_HAVE_CUDA_SERVE
  throw_error(errc::unsupported, "--device cuda: this troupe was built without CUDA (nvcc was not found when it was "
                                 "configured; docs/cuda.md)");
#endif
}

}  // namespace

model_flags::loaded model_flags::load(const std::string& dir) const {
  quant::load_options lo;
  lo.quantization = quant::parse_method(quantization, "--quantization");
  if (no_mmap) lo.weights = residency::huge_pages;
  lo.rope_scaling = rope_scaling;
  lo.generation_config = generation_config;
  lo.override_generation_config = override_generation_config;
  loaded out;
  out.kv_type = parse_kv_cache_dtype(kv_dtype);
  out.compute = parse_compute_dtype(compute);
  if (tensor_parallel_size < 1)
    throw_error(errc::invalid_argument,
                "--tensor-parallel-size must be >= 1 (got " + std::to_string(tensor_parallel_size) + ")");
  if (pipeline_parallel_size < 1)
    throw_error(errc::invalid_argument,
                "--pipeline-parallel-size must be >= 1 (got " + std::to_string(pipeline_parallel_size) + ")");
  const auto stage_layers = parse_pipeline_layers(pipeline_layers, "--pipeline-layers");
  const auto schedule = parse_pipeline_schedule(pipeline_schedule, "--pipeline-schedule");
  if (threads < 0) throw_error(errc::invalid_argument, "--threads must be >= 0 (got " + std::to_string(threads) + "; 0 = every core)");
  check_device(*this);
  // The load's own parallel work (quantizing, converting) on as many threads as the steps.
  if (threads > 0) omp_set_num_threads(threads);
  out.ck = quant::load_model(dir, lo);
  out.parallel = {tensor_parallel_size, expert_parallel, threads};
  out.parallel.pipeline_size = pipeline_parallel_size;
  out.parallel.pipeline_layers = stage_layers;
  out.parallel.schedule = schedule;
  check_parallel(*out.ck, out.parallel);
  if (!lora.empty()) out.adapter = std::make_shared<lora_adapter>(load_lora_adapter(lora, out.ck->config));
#ifdef TROUPE_HAVE_CUDA_SERVE
  if (device == "cuda")
    out.engines = [ck = out.ck.get()](int32_t num_blocks, int32_t block_size) -> std::unique_ptr<step_engine> {
      return serve::make_cuda_backend(*ck, num_blocks, block_size);
    };
#endif
  return out;
}

generate_options model_flags::loaded::run_options() const {
  generate_options o;
  o.kv_cache_dtype = kv_type;
  o.compute = compute;
  o.adapter = adapter;
  return o;
}

}  // namespace troupe::cli
