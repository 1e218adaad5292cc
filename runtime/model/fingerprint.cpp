// model_fingerprint: a fixed, documented hash of what determines a model's outputs, so replicas
// agree on prefix-cache keys. Changing anything hashed here changes the version string.
#include <cstdio>
#include <cstring>

#include "kernels/u4_layout.hpp"
#include "runtime/core/fnv1a64.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/tensor_layout.hpp"

namespace troupe {

namespace {

// Four windows of up to 32 bytes at 0, 1/3, 2/3 and the end: different weights of the same
// shape (another seed, a fine-tune) differ there, and reading them costs four page touches.
void sample(fnv1a64& h, const uint8_t* p, uint64_t n) {
  const uint64_t w = n < 32 ? n : 32;
  const uint64_t span = n - w;
  for (uint64_t at : {uint64_t{0}, span / 3, span / 3 * 2, span}) h.bytes(p + at, w);
}

const char* lower_dtype(dtype t) {
  switch (t) {
    case dtype::f32: return "f32";
    case dtype::f16: return "f16";
    case dtype::bf16: return "bf16";
    case dtype::i8: return "i8";
    case dtype::u4: return "u4";
    case dtype::f8_e4m3: return "f8";
    default: return "other";
  }
}

}  // namespace

std::string model_fingerprint(const checkpoint& ck) {
  const model_config& c = ck.config;
  fnv1a64 h;
  h.str("troupe-fingerprint-v1");
  h.str(model_type_name(c.arch));
  for (int64_t v : {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers,
                    c.num_attention_heads, c.num_key_value_heads, c.head_dim})
    h.i64(v);
  h.f64(c.rms_norm_eps);
  h.f64(c.rope_theta);
  // Absent for plain RoPE, so the keys of models without scaling stay what they were.
  if (c.rope.type != rope_scaling_type::none) {
    h.str(rope_scaling_name(c.rope.type));
    for (double v : {c.rope.factor, c.rope.attention_factor, c.rope.beta_fast, c.rope.beta_slow}) h.f64(v);
    h.i64(c.rope.original_max_position_embeddings);
    h.u64(c.rope.truncate);
  }
  h.u64(c.tie_word_embeddings);
  if (c.arch == architecture::qwen3_moe) {
    for (int64_t v : {c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size,
                      c.decoder_sparse_step, static_cast<int64_t>(c.mlp_only_layers.size())})
      h.i64(v);
    for (int64_t l : c.mlp_only_layers) h.i64(l);
    h.u64(c.norm_topk_prob);
  }

  std::string dtypes;
  for (const auto& t : expected_tensors(c)) {
    h.str(t.name);
    if (const std::vector<float>* norm = norm_slot(ck.weights, t)) {
      // Norms are used widened; their values, not their stored dtype, change the outputs.
      h.str("F32");
      h.u64(norm->size());
      for (float f : *norm) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        h.u64(bits);
      }
      continue;
    }
    const kernels::weight_ref& w = *weight_slot(ck.weights, t);
    h.str(to_string(w.type));
    h.i64(w.rows);
    h.i64(w.cols);
    h.u64(w.bytes());
    sample(h, static_cast<const uint8_t*>(w.data), w.bytes());
    if (w.scales) {  // quantized (runtime/quant): the scales change the outputs as much as the codes
      h.i64(w.group_rows);
      h.i64(w.group_cols);
      sample(h, reinterpret_cast<const uint8_t*>(w.scales), w.scale_bytes());
      if (w.zeros) sample(h, w.zeros, kernels::zero_bytes(w));
    }
    const char* d = lower_dtype(w.type);
    if (dtypes.empty()) dtypes = d;
    else if (dtypes != d) dtypes = "mixed";
  }

  std::string s = std::string(model_type_name(c.arch)) + "-v" + std::to_string(c.vocab_size) +
                  "-h" + std::to_string(c.hidden_size) + "-l" + std::to_string(c.num_hidden_layers) +
                  "-a" + std::to_string(c.num_attention_heads) + "x" +
                  std::to_string(c.num_key_value_heads) + "x" + std::to_string(c.head_dim) + "-i" +
                  std::to_string(c.intermediate_size);
  if (c.arch == architecture::qwen3_moe)
    s += "-e" + std::to_string(c.num_experts) + "x" + std::to_string(c.num_experts_per_tok) + "x" +
         std::to_string(c.moe_intermediate_size);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value()));
  return s + "-" + dtypes + "-" + hex;
}

}  // namespace troupe
