// The CUDA forward step v0 (cuda_model_runner.hpp): the operations of model_runner.cpp in the same
// order, each a kernel of kernels/cuda/forward_ops.hpp or a GEMM, all rows through all layers
// (no last-layer pruning: the rows are independent, so only the cost differs), logits gathered last.
#include "runtime/engine/cuda/cuda_model_runner.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/forward_ops.hpp"
#include "kernels/cuda/gemm.hpp"
#include "runtime/core/error.hpp"
#include "runtime/model/rope.hpp"

namespace troupe {

namespace cu = kernels::cuda;

// ---- KV pool ------------------------------------------------------------------------------------

struct cuda_kv_pool::storage {
  cu::device_buffer buf;
};

cuda_kv_pool::cuda_kv_pool(const model_config& config, int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  if (num_blocks < 1 || block_size < 1 || static_cast<int64_t>(num_blocks) * block_size >= (int64_t{1} << 31))
    throw_error(errc::invalid_argument, "cuda_kv_pool: num_blocks and block_size must be >= 1 (and their product < 2^31); got " +
                                            std::to_string(num_blocks) + " x " + std::to_string(block_size));
  layer_floats_ = static_cast<int64_t>(num_blocks) * block_size * config.num_key_value_heads * config.head_dim;
  storage_ = std::make_unique<storage>();
  storage_->buf = cu::device_buffer(static_cast<size_t>(2 * config.num_hidden_layers * layer_floats_) * sizeof(float));
  storage_->buf.fill_zero();
}

cuda_kv_pool::~cuda_kv_pool() = default;

float* cuda_kv_pool::k(int64_t layer) const noexcept { return storage_->buf.as<float>() + 2 * layer * layer_floats_; }
float* cuda_kv_pool::v(int64_t layer) const noexcept {
  return storage_->buf.as<float>() + (2 * layer + 1) * layer_floats_;
}
size_t cuda_kv_pool::bytes() const noexcept { return storage_->buf.size_bytes(); }

// ---- runner -------------------------------------------------------------------------------------

namespace {

// A linear weight on the device: float32 (widened) or FP8 codes + 128 x 128 block scales.
struct dev_weight {
  const float* f32 = nullptr;
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  int64_t rows = 0, cols = 0;
  size_t bytes = 0;  // device bytes (codes + scales for FP8)
};

struct dev_layer {
  dev_weight q, k, v, o, gate, up, down;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* input_norm = nullptr;
  const float* post_norm = nullptr;
};

void ensure(cu::device_buffer& b, size_t bytes) {
  if (b.size_bytes() >= bytes) return;
  b = cu::device_buffer();  // free first: the old and new need not both fit
  b = cu::device_buffer(bytes + bytes / 4);
}

}  // namespace

struct cuda_model_runner::impl {
  model_config cfg;
  cuda_kv_pool kv;
  cu::blas_handle blas;
  std::vector<cu::device_buffer> owned;  // every weight, norm and inv_freq
  std::map<const void*, dev_weight> by_host;  // tied lm_head = embed_tokens: one upload
  cu::device_buffer staging;
  dev_weight embed, lm_head;
  const float* final_norm = nullptr;
  const float* inv_freq = nullptr;
  float rope_scale = 1.0f;
  std::vector<dev_layer> layers;
  size_t bytes_step = 0, bytes_all = 0;
  // Scratch, grown to the largest step seen.
  cu::device_buffer x, h, q, k, v, attn, tmp, gate, up, fin, logits, ints, fp8_ws;
  std::vector<int32_t> host_ints;

  impl(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size)
      : cfg(ckpt.config), kv(ckpt.config, num_blocks, block_size) {
    const auto& w = ckpt.weights;
    embed = upload(w.embed_tokens, "model.embed_tokens.weight");
    if (embed.f32 == nullptr)
      throw_error(errc::unsupported, "cuda_model_runner: the embedding table must be f32, f16 or bf16");
    lm_head = upload(w.lm_head, "lm_head.weight");
    final_norm = upload_floats(w.norm);
    bytes_step += lm_head.bytes + w.norm.size() * sizeof(float);
    layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      const auto& lw = w.layers[static_cast<size_t>(l)];
      auto& d = layers[static_cast<size_t>(l)];
      const std::string p = "model.layers." + std::to_string(l) + ".";
      d.q = upload(lw.q_proj, p + "self_attn.q_proj.weight");
      d.k = upload(lw.k_proj, p + "self_attn.k_proj.weight");
      d.v = upload(lw.v_proj, p + "self_attn.v_proj.weight");
      d.o = upload(lw.o_proj, p + "self_attn.o_proj.weight");
      d.gate = upload(lw.gate_proj, p + "mlp.gate_proj.weight");
      d.up = upload(lw.up_proj, p + "mlp.up_proj.weight");
      d.down = upload(lw.down_proj, p + "mlp.down_proj.weight");
      d.q_norm = upload_floats(lw.q_norm);
      d.k_norm = upload_floats(lw.k_norm);
      d.input_norm = upload_floats(lw.input_layernorm);
      d.post_norm = upload_floats(lw.post_attention_layernorm);
      for (const dev_weight* m : {&d.q, &d.k, &d.v, &d.o, &d.gate, &d.up, &d.down}) bytes_step += m->bytes;
      bytes_step += (lw.q_norm.size() + lw.k_norm.size() + lw.input_layernorm.size() +
                     lw.post_attention_layernorm.size()) *
                    sizeof(float);
    }
    const rope_frequencies rope = rope_frequencies_of(cfg);  // as model_runner
    inv_freq = upload_floats(rope.inv_freq);
    rope_scale = rope.attention_factor;
    staging = cu::device_buffer();
    cu::synchronize();
  }

  const float* upload_floats(const std::vector<float>& v) {
    owned.emplace_back(v.size() * sizeof(float));
    owned.back().upload(v.data(), v.size() * sizeof(float));
    bytes_all += v.size() * sizeof(float);
    return owned.back().as<float>();
  }

  dev_weight upload(const kernels::weight_ref& w, const std::string& name) {
    if (auto it = by_host.find(w.data); it != by_host.end() && it->second.rows == w.rows && it->second.cols == w.cols)
      return it->second;
    dev_weight d;
    d.rows = w.rows;
    d.cols = w.cols;
    const size_t count = static_cast<size_t>(w.rows * w.cols);
    switch (w.type) {
      case dtype::f32:
      case dtype::f16:
      case dtype::bf16: {
        owned.emplace_back(count * sizeof(float));
        float* dst = owned.back().as<float>();
        if (w.type == dtype::f32) {
          owned.back().upload(w.data, count * sizeof(float));
        } else {
          ensure(staging, w.bytes());
          staging.upload(w.data, w.bytes());
          cu::widen_to_f32(staging.data(), static_cast<int>(w.type), static_cast<int64_t>(count), dst, nullptr);
        }
        d.f32 = dst;
        d.bytes = count * sizeof(float);
        break;
      }
      case dtype::f8_e4m3: {
        if (w.scales == nullptr || w.group_rows != 128 || w.group_cols != 128)
          throw_error(errc::unsupported, "cuda_model_runner: " + name + " is FP8 with " + std::to_string(w.group_rows) +
                                             " x " + std::to_string(w.group_cols) +
                                             " scale blocks; the CUDA GEMM takes 128 x 128 (Qwen's FP8)");
        if (w.rows % 16 != 0 || w.cols % 16 != 0)
          throw_error(errc::unsupported, "cuda_model_runner: " + name + " is FP8 of shape " + std::to_string(w.rows) +
                                             " x " + std::to_string(w.cols) +
                                             "; the CUDA FP8 GEMM needs multiples of 16");
        owned.emplace_back(count);
        owned.back().upload(w.data, count);
        d.codes = owned.back().as<uint8_t>();
        owned.emplace_back(w.scale_bytes());
        owned.back().upload(w.scales, w.scale_bytes());
        d.scales = owned.back().as<float>();
        d.bytes = count + w.scale_bytes();
        break;
      }
      default:
        throw_error(errc::unsupported, "cuda_model_runner: " + name + " has dtype " + std::string(to_string(w.type)) +
                                           "; the CUDA forward step v0 takes f32, f16, bf16 or FP8 (128 x 128 blocks)");
    }
    bytes_all += d.bytes;
    by_host[w.data] = d;
    return d;
  }

  void matmul(const float* xin, int64_t n, const dev_weight& w, float* y) {
    if (w.codes != nullptr) {
      ensure(fp8_ws, cu::fp8_workspace_bytes(n, w.cols));
      cu::matmul_fp8_block(xin, cu::act_type::f32, n, w.codes, w.scales, w.rows, w.cols, y, fp8_ws.data(), nullptr);
      cu::check_launch("matmul_fp8_block");
    } else {
      cu::matmul_f32_cublas(blas, xin, n, w.f32, w.rows, w.cols, y, nullptr);
    }
  }
};

void cuda_model_runner::check_supported(const model_config& config) {
  if (config.arch == architecture::qwen3_moe)
    throw_error(errc::unsupported,
                "cuda_model_runner: Qwen3MoeForCausalLM (MoE) is not supported by the CUDA forward step v0; "
                "only dense Qwen3ForCausalLM runs on CUDA (use the CPU engine, model_runner, for MoE)");
  if (config.num_key_value_heads <= 0 || config.num_attention_heads % config.num_key_value_heads != 0)
    throw_error(errc::unsupported, "cuda_model_runner: num_attention_heads must be a multiple of num_key_value_heads");
  if (config.head_dim <= 0 || config.head_dim % 2 != 0 || config.head_dim > 4096)
    throw_error(errc::unsupported, "cuda_model_runner: head_dim must be even and at most 4096");
}

cuda_model_runner::cuda_model_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size) {
  check_supported(ckpt.config);
  // Its only output is logits (hidden states are the CPU runner's): lm_head here is a stand-in.
  if (ckpt.no_lm_head)
    throw_error(errc::unsupported, "cuda_model_runner: " + ckpt.dir +
                                       " has no lm_head.weight (an embedding-only export); it computes logits");
  if (num_blocks < 1 || block_size < 1)
    throw_error(errc::invalid_argument, "cuda_model_runner: num_blocks and block_size must be >= 1");
  if (cu::device_count() == 0) throw_error(errc::unsupported, "cuda_model_runner: no CUDA device");
  impl_ = std::make_unique<impl>(ckpt, num_blocks, block_size);
}

cuda_model_runner::~cuda_model_runner() = default;

const model_config& cuda_model_runner::config() const noexcept { return impl_->cfg; }
const cuda_kv_pool& cuda_model_runner::kv() const noexcept { return impl_->kv; }
size_t cuda_model_runner::weight_bytes_per_step() const noexcept { return impl_->bytes_step; }
size_t cuda_model_runner::device_weight_bytes() const noexcept { return impl_->bytes_all; }

// The same checks and messages as model_runner (step.hpp).
void cuda_model_runner::validate(const model_config& cfg, int32_t num_blocks, int32_t block_size,
                                 std::span<const step_sequence> batch) {
  validate_step(batch, cfg, num_blocks, block_size);
}

void cuda_model_runner::step(std::span<const step_sequence> batch, step_result& out) {
  auto& m = *impl_;
  const auto& cfg = m.cfg;
  validate(cfg, m.kv.num_blocks(), m.kv.block_size(), batch);
  const int64_t hidden = cfg.hidden_size, hq = cfg.num_attention_heads, hk = cfg.num_key_value_heads;
  const int64_t d = cfg.head_dim, inter = cfg.intermediate_size, vocab = cfg.vocab_size;
  const int32_t bs = m.kv.block_size();
  const float eps = static_cast<float>(cfg.rms_norm_eps);

  // Host side: per token its id, position, KV slot and block-table offset; the rows whose logits
  // were asked for; the block tables (only the blocks each sequence's positions need).
  int64_t n = 0, n_tables = 0;
  for (const auto& sq : batch) {
    const int64_t end = sq.start_pos + static_cast<int64_t>(sq.tokens.size());
    n += static_cast<int64_t>(sq.tokens.size());
    n_tables += (end + bs - 1) / bs;
  }
  out.vocab_size = vocab;
  out.first_row.assign(batch.size(), 0);
  out.num_rows.assign(batch.size(), 0);
  out.hidden_row.assign(batch.size(), -1);
  out.hidden.clear();
  for (const auto& sq : batch)
    if (sq.logits == logits_mode::hidden)
      throw_error(errc::unsupported, "sequence " + std::to_string(sq.seq_id) +
                                         ": hidden states (embeddings) are computed on the CPU runner only");
  std::vector<int32_t> rows;
  {
    int64_t row = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      const int64_t cnt = static_cast<int64_t>(batch[s].tokens.size());
      out.first_row[s] = static_cast<int64_t>(rows.size());
      if (batch[s].logits == logits_mode::last) {
        rows.push_back(static_cast<int32_t>(row + cnt - 1));
      } else if (batch[s].logits == logits_mode::all) {
        for (int64_t t = 0; t < cnt; ++t) rows.push_back(static_cast<int32_t>(row + t));
      }
      out.num_rows[s] = static_cast<int64_t>(rows.size()) - out.first_row[s];
      row += cnt;
    }
  }
  const int64_t n_out = static_cast<int64_t>(rows.size());
  out.logits.resize(static_cast<size_t>(n_out * vocab));
  if (n == 0) return;

  const int64_t o_ids = 0, o_pos = n, o_slot = 2 * n, o_toff = 3 * n, o_rows = 4 * n, o_tab = 4 * n + n_out;
  auto& hi = m.host_ints;
  hi.assign(static_cast<size_t>(o_tab + n_tables), 0);
  {
    int64_t row = 0, toff = 0;
    for (const auto& sq : batch) {
      const int64_t cnt = static_cast<int64_t>(sq.tokens.size());
      const int64_t need = (sq.start_pos + cnt + bs - 1) / bs;
      for (int64_t b = 0; b < need; ++b) hi[static_cast<size_t>(o_tab + toff + b)] = sq.block_table[b];
      for (int64_t t = 0; t < cnt; ++t, ++row) {
        const int64_t pos = sq.start_pos + t;
        hi[static_cast<size_t>(o_ids + row)] = sq.tokens[t];
        hi[static_cast<size_t>(o_pos + row)] = static_cast<int32_t>(pos);
        hi[static_cast<size_t>(o_slot + row)] = sq.block_table[pos / bs] * bs + static_cast<int32_t>(pos % bs);
        hi[static_cast<size_t>(o_toff + row)] = static_cast<int32_t>(toff);
      }
      toff += need;
    }
  }
  std::copy(rows.begin(), rows.end(), hi.begin() + o_rows);

  const auto fsz = [](int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); };
  ensure(m.ints, hi.size() * sizeof(int32_t));
  ensure(m.x, fsz(n * hidden));
  ensure(m.h, fsz(n * hidden));
  ensure(m.tmp, fsz(n * hidden));
  ensure(m.q, fsz(n * hq * d));
  ensure(m.attn, fsz(n * hq * d));
  ensure(m.k, fsz(n * hk * d));
  ensure(m.v, fsz(n * hk * d));
  ensure(m.gate, fsz(n * inter));
  ensure(m.up, fsz(n * inter));
  cu::copy_to_device(m.ints.data(), hi.data(), hi.size() * sizeof(int32_t));
  const int32_t* di = m.ints.as<int32_t>();
  const int32_t *ids = di + o_ids, *positions = di + o_pos, *slots = di + o_slot, *toffs = di + o_toff,
                *out_rows = di + o_rows, *tables = di + o_tab;

  float *x = m.x.as<float>(), *h = m.h.as<float>(), *tmp = m.tmp.as<float>(), *q = m.q.as<float>();
  float *k = m.k.as<float>(), *v = m.v.as<float>(), *attn = m.attn.as<float>();
  float *gate = m.gate.as<float>(), *up = m.up.as<float>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));

  cu::embedding_f32(m.embed.f32, ids, n, hidden, x, nullptr);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    const auto& lw = m.layers[static_cast<size_t>(l)];
    cu::rmsnorm_f32(x, lw.input_norm, n, hidden, eps, h, nullptr);
    m.matmul(h, n, lw.k, k);
    m.matmul(h, n, lw.v, v);
    m.matmul(h, n, lw.q, q);
    // Qwen3: per-head RMSNorm of q and k over head_dim, before RoPE.
    cu::rmsnorm_f32(k, lw.k_norm, n * hk, d, eps, k, nullptr);
    cu::rmsnorm_f32(q, lw.q_norm, n * hq, d, eps, q, nullptr);
    cu::rope_f32(k, n, hk, d, positions, m.inv_freq, m.rope_scale, nullptr);
    cu::rope_f32(q, n, hq, d, positions, m.inv_freq, m.rope_scale, nullptr);
    cu::kv_write_f32(m.kv.k(l), m.kv.v(l), k, v, slots, n, hk * d, nullptr);
    cu::paged_attention_f32(q, n, hq, hk, d, m.kv.k(l), m.kv.v(l), bs, tables, toffs, positions, scale, attn, nullptr);
    m.matmul(attn, n, lw.o, tmp);
    cu::add_inplace_f32(x, tmp, n * hidden, nullptr);
    cu::rmsnorm_f32(x, lw.post_norm, n, hidden, eps, h, nullptr);
    m.matmul(h, n, lw.gate, gate);
    m.matmul(h, n, lw.up, up);
    cu::silu_mul_f32(gate, up, n * inter, gate, nullptr);
    m.matmul(gate, n, lw.down, tmp);
    cu::add_inplace_f32(x, tmp, n * hidden, nullptr);
  }
  if (n_out == 0) {
    cu::synchronize();  // a fault in this step is reported by this step
    return;
  }
  ensure(m.fin, fsz(n_out * hidden));
  ensure(m.logits, fsz(n_out * vocab));
  float* fin = m.fin.as<float>();
  cu::gather_rows_f32(x, out_rows, n_out, hidden, fin, nullptr);
  cu::rmsnorm_f32(fin, m.final_norm, n_out, hidden, eps, fin, nullptr);
  m.matmul(fin, n_out, m.lm_head, m.logits.as<float>());
  cu::copy_to_host(out.logits.data(), m.logits.data(), fsz(n_out * vocab));  // waits for the step
}

}  // namespace troupe
