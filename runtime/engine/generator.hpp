// Single-request generation on the model runner: prefill (optionally in chunks), then decode
// with sampling until max_tokens or a stop id. What `troupe generate` and `troupe logits` run,
// and the reference a server's output must equal for the same request.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/embedding.hpp"
#include "runtime/engine/model_runner.hpp"
#include "runtime/engine/step_engine.hpp"
#include "runtime/engine/parallel_runner.hpp"
#include "runtime/sampling/sampler.hpp"

namespace troupe {

struct generate_options {
  int32_t max_tokens = 16;
  sampling_params sampling;
  int32_t prefill_chunk = 0;  // tokens per prefill step; 0 = the whole prompt in one step
  dtype kv_cache_dtype = dtype::f32;  // the private pool's element type (--kv-cache-dtype)
  kernels::compute_dtype compute = kernels::compute_dtype::f32;  // matmul arithmetic (--compute-dtype)
  std::shared_ptr<const lora_adapter> adapter;                    // a LoRA adapter (--lora); null: the base model
  // Speculative decoding (set: on): draft tokens to follow `context` (prompt + output so far), at
  // most `max_drafts`. A decode step then carries them after the real token and every row is
  // sampled in turn while the drafts hold, so the ids are exactly those without drafts.
  std::function<std::vector<int32_t>(std::span<const int32_t> context, int32_t max_drafts)> propose;
};

struct generate_output {
  std::vector<int32_t> ids;
  std::string finish_reason;  // "stop" (a stop id was sampled) or "length"
  int64_t decode_steps = 0;     // forward steps after the prompt
  int64_t accepted_drafts = 0;  // tokens that came from verified drafts (no step of their own)
};

class generator {
 public:
  // A group size above 1: each request runs on a tensor-parallel group of that many CPU shards
  // (expert parallel when asked), pipeline_size above 1 on that many stages (parallel_runner);
  // the ranks and stages are made per request.
  // `engines` (set): each request runs on an engine it makes instead (the CUDA runner: troupe
  // generate --device cuda), which ignores parallel, the KV dtype, the compute dtype and the
  // runner options (the caller refuses them); a LoRA adapter is then refused (unsupported).
  explicit generator(const checkpoint& ckpt, parallel_config parallel = {}, step_engine_factory engines = {})
      : ckpt_(ckpt), parallel_(parallel), engines_(std::move(engines)) {}

  // on_token (optional) sees every new id as it is sampled.
  generate_output generate(const std::vector<int32_t>& prompt, const generate_options& opts,
                           const std::function<void(int32_t)>& on_token = {});

  // Logits of every prompt position, row-major [prompt.size(), vocab]. `runner`: the matmul
  // arithmetic (compute dtype) and fp8_activations (model_runner_options).
  std::vector<float> prompt_logits(const std::vector<int32_t>& prompt, int32_t prefill_chunk = 0,
                                   dtype kv_cache_dtype = dtype::f32, model_runner_options runner = {},
                                   std::shared_ptr<const lora_adapter> adapter = nullptr);

  // The logits row of the prompt's last token (a reranker's score reads it: runtime/serve/rerank.hpp).
  // generate_options' prefill_chunk, kv_cache_dtype, compute and adapter apply.
  std::vector<float> last_logits(const std::vector<int32_t>& prompt, const generate_options& run = {});

  // The prompt's embedding (embedding.hpp): its last token's final hidden state, finished as
  // `opts` says. generate_options' prefill_chunk, kv_cache_dtype, compute and adapter apply.
  std::vector<float> embed(const std::vector<int32_t>& prompt, const embedding_options& opts,
                           const generate_options& run = {});
  // The embeddings of several prompts, batched as vLLM's offline embed() batches them: whole
  // prompts share a step up to run.prefill_chunk tokens (0: kEmbedStepTokens); a longer prompt
  // runs alone in chunks of that many. Each result is embed() of its prompt alone, bit for bit.
  static constexpr int32_t kEmbedStepTokens = 2048;
  std::vector<std::vector<float>> embed_batch(const std::vector<std::vector<int32_t>>& prompts,
                                              const embedding_options& opts, const generate_options& run = {});

 private:
  const checkpoint& ckpt_;
  parallel_config parallel_;
  step_engine_factory engines_;
};

}  // namespace troupe
