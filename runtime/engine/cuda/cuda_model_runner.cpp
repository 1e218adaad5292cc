// The CUDA forward step v0 (cuda_model_runner.hpp): the operations of model_runner.cpp in the same
// order, each a kernel of kernels/cuda/forward_ops.hpp or a GEMM, all rows through all layers
// (no last-layer pruning: the rows are independent, so only the cost differs), logits gathered last.
#include "runtime/engine/cuda/cuda_model_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/device_buffer.hpp"
#include "kernels/cuda/forward_ops.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/graph.hpp"
#include "runtime/core/error.hpp"
#include "runtime/model/rope.hpp"

namespace troupe {

namespace cu = kernels::cuda;

// ---- KV pool ------------------------------------------------------------------------------------

struct cuda_kv_pool::storage {
  cu::device_buffer buf;
};

cuda_kv_pool::cuda_kv_pool(const model_config& config, int32_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size), num_layers_(config.num_hidden_layers) {
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

size_t cuda_kv_pool::block_floats() const noexcept {
  return static_cast<size_t>(2 * num_layers_ * (layer_floats_ / num_blocks_));
}

namespace {

// The pool's [layer][K, V] parts of one block, each `part` floats, in payload order.
template <class Copy>
void for_each_block_part(const cuda_kv_pool& kv, int64_t layers, int32_t block, size_t part, Copy&& copy) {
  for (int64_t l = 0; l < layers; ++l) {
    copy(kv.k(l) + static_cast<size_t>(block) * part, static_cast<size_t>(2 * l) * part);
    copy(kv.v(l) + static_cast<size_t>(block) * part, static_cast<size_t>(2 * l + 1) * part);
  }
}

void check_block_copy(const cuda_kv_pool& kv, int32_t block, size_t floats, const char* what) {
  if (block < 0 || block >= kv.num_blocks())
    throw_error(errc::invalid_argument, std::string(what) + ": block " + std::to_string(block) + " outside the pool of " +
                                            std::to_string(kv.num_blocks()));
  if (floats != kv.block_floats())
    throw_error(errc::invalid_argument, std::string(what) + ": " + std::to_string(floats) +
                                            " floats; a block of this pool has " + std::to_string(kv.block_floats()));
}

}  // namespace

void cuda_kv_pool::read_block(int32_t block, std::span<float> out) const {
  check_block_copy(*this, block, out.size(), "cuda_kv_pool::read_block");
  const size_t part = out.size() / static_cast<size_t>(2 * num_layers_);
  for_each_block_part(*this, num_layers_, block, part, [&](const float* dev, size_t at) {
    cu::copy_to_host(out.data() + at, dev, part * sizeof(float));
  });
}

void cuda_kv_pool::write_block(int32_t block, std::span<const float> in) {
  check_block_copy(*this, block, in.size(), "cuda_kv_pool::write_block");
  const size_t part = in.size() / static_cast<size_t>(2 * num_layers_);
  for_each_block_part(*this, num_layers_, block, part, [&](float* dev, size_t at) {
    cu::copy_to_device(dev, in.data() + at, part * sizeof(float));
  });
  // cudaMemcpy from pageable memory may return before its DMA lands, and the step's stream does not
  // wait for the default stream (it is non-blocking): the next step must see the whole block.
  cu::synchronize();
}

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

// A layer's weights. qkv / gate_up: the q, k, v (gate, up) rows stacked into one matrix, so one
// product computes them (vLLM's QKVParallelLinear, MergedColumnParallelLinear); empty (rows 0) where
// they cannot be stacked (FP8 parts whose rows are not whole 128-row scale blocks), and then the
// separate q, k, v (gate, up) run.
struct dev_layer {
  dev_weight qkv, gate_up;
  dev_weight q, k, v, o, gate, up, down;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* input_norm = nullptr;
  const float* post_norm = nullptr;
};

bool graphs_allowed_by_environment() {
  const char* e = std::getenv("TROUPE_CUDA_GRAPHS");
  return !(e != nullptr && std::strcmp(e, "0") == 0) && !cu::sync_check_enabled();
}

// cuBLAS's workspace (NVIDIA's recommendation for Hopper), given up front so that a captured
// cublasSgemm never allocates.
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

}  // namespace

struct cuda_model_runner::impl {
  model_config cfg;
  cuda_kv_pool kv;
  cu::stream stream;  // every step's work, eager or replayed
  cu::blas_handle blas;
  cu::device_buffer blas_ws;
  std::vector<cu::device_buffer> owned;  // every weight, norm and inv_freq
  std::map<const void*, dev_weight> by_host;  // tied lm_head = embed_tokens: one upload
  cu::device_buffer staging;
  dev_weight embed, lm_head;
  const float* final_norm = nullptr;
  const float* inv_freq = nullptr;
  float rope_scale = 1.0f;
  std::vector<dev_layer> layers;
  bool any_fp8 = false;
  size_t bytes_step = 0, bytes_all = 0;
  // Scratch, grown to the largest step seen; scratch_gen counts the regrowths (a graph captured
  // before one points at freed memory).
  cu::device_buffer x, h, qkv, q, attn, tmp, gu, act, fin, logits, ints, fp8_ws;
  uint64_t scratch_gen = 1;
  std::vector<int32_t> host_ints;
  // Decode graphs, one per batch size 1..max_graph_batch, and their own input buffer (ids,
  // positions, slots, table offsets, rows, block tables), allocated once so its address holds.
  struct graph_slot {
    cu::graph g;
    uint64_t gen = 0;
  };
  bool graphs_on = false;
  int32_t max_graph_batch = 0;
  std::vector<graph_slot> graphs;
  cu::device_buffer graph_ints;
  int64_t captured = 0, replays = 0;

  impl(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size, const cuda_runner_options& opts)
      : cfg(ckpt.config), kv(ckpt.config, num_blocks, block_size) {
    blas_ws = cu::device_buffer(kBlasWorkspaceBytes);
    blas.set_workspace(blas_ws.data(), blas_ws.size_bytes());
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
      d.qkv = upload_stacked({&lw.q_proj, &lw.k_proj, &lw.v_proj});
      if (d.qkv.rows == 0) {
        d.q = upload(lw.q_proj, p + "self_attn.q_proj.weight");
        d.k = upload(lw.k_proj, p + "self_attn.k_proj.weight");
        d.v = upload(lw.v_proj, p + "self_attn.v_proj.weight");
      }
      d.o = upload(lw.o_proj, p + "self_attn.o_proj.weight");
      d.gate_up = upload_stacked({&lw.gate_proj, &lw.up_proj});
      if (d.gate_up.rows == 0) {
        d.gate = upload(lw.gate_proj, p + "mlp.gate_proj.weight");
        d.up = upload(lw.up_proj, p + "mlp.up_proj.weight");
      }
      d.down = upload(lw.down_proj, p + "mlp.down_proj.weight");
      d.q_norm = upload_floats(lw.q_norm);
      d.k_norm = upload_floats(lw.k_norm);
      d.input_norm = upload_floats(lw.input_layernorm);
      d.post_norm = upload_floats(lw.post_attention_layernorm);
      for (const dev_weight* m : {&d.qkv, &d.gate_up, &d.q, &d.k, &d.v, &d.o, &d.gate, &d.up, &d.down})
        bytes_step += m->bytes;
      bytes_step += (lw.q_norm.size() + lw.k_norm.size() + lw.input_layernorm.size() +
                     lw.post_attention_layernorm.size()) *
                    sizeof(float);
    }
    const rope_frequencies rope = rope_frequencies_of(cfg);  // as model_runner
    inv_freq = upload_floats(rope.inv_freq);
    rope_scale = rope.attention_factor;
    staging = cu::device_buffer();
    graphs_on = opts.graphs && opts.max_graph_batch > 0 && graphs_allowed_by_environment();
    if (graphs_on) {
      max_graph_batch = opts.max_graph_batch;
      graphs.resize(static_cast<size_t>(max_graph_batch) + 1);
      graph_ints = cu::device_buffer(static_cast<size_t>(graph_ints_capacity()) * sizeof(int32_t));
    }
    cu::synchronize();
  }

  // Per sequence at most the blocks of max_position_embeddings (validate_step's limit) or of the
  // pool; a step whose tables need more runs eagerly.
  int64_t graph_ints_capacity() const {
    const int64_t bs = kv.block_size();
    const int64_t per_seq = std::min<int64_t>(kv.num_blocks(), (std::max<int64_t>(cfg.max_position_embeddings, 1) + bs - 1) / bs);
    return static_cast<int64_t>(max_graph_batch) * (5 + per_seq);
  }

  void grow(cu::device_buffer& b, size_t bytes) {
    if (b.size_bytes() >= bytes) return;
    b = cu::device_buffer();  // free first: the old and new need not both fit
    b = cu::device_buffer(bytes + bytes / 4);
    ++scratch_gen;
  }

  const float* upload_floats(const std::vector<float>& v) {
    owned.emplace_back(v.size() * sizeof(float));
    owned.back().upload(v.data(), v.size() * sizeof(float));
    bytes_all += v.size() * sizeof(float);
    return owned.back().as<float>();
  }

  // A float weight (f32, f16, bf16) as float32 at dst (rows * cols floats of device memory).
  // F16/BF16 go through `staging` and are widened on the legacy stream, which orders the next
  // upload into staging after this widening.
  void put_floats(float* dst, const kernels::weight_ref& w) {
    const int64_t count = w.rows * w.cols;
    if (w.type == dtype::f32) {
      cu::copy_to_device(dst, w.data, static_cast<size_t>(count) * sizeof(float));
      return;
    }
    grow(staging, w.bytes());
    staging.upload(w.data, w.bytes());
    cu::widen_to_f32(staging.data(), static_cast<int>(w.type), count, dst, nullptr);
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
        put_floats(dst, w);
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
        any_fp8 = true;
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

  // The parts' rows stacked in order into one device matrix: float parts (f32, f16, bf16) widened
  // to float32 into their slices, or FP8 parts whose codes and 128 x 128 scale blocks stack because
  // each part's rows are whole blocks. Anything else: an empty weight (rows 0), nothing uploaded.
  dev_weight upload_stacked(std::initializer_list<const kernels::weight_ref*> parts) {
    const kernels::weight_ref& first = **parts.begin();
    const bool fp8 = first.type == dtype::f8_e4m3;
    int64_t rows = 0;
    for (const auto* w : parts) {
      const bool float_part = w->type == dtype::f32 || w->type == dtype::f16 || w->type == dtype::bf16;
      const bool fp8_part = w->type == dtype::f8_e4m3 && w->scales != nullptr && w->group_rows == 128 &&
                            w->group_cols == 128 && w->rows % 128 == 0 && w->cols % 16 == 0;
      if (w->cols != first.cols || (fp8 ? !fp8_part : !float_part)) return {};
      rows += w->rows;
    }
    dev_weight d;
    d.rows = rows;
    d.cols = first.cols;
    const size_t count = static_cast<size_t>(rows * first.cols);
    if (fp8) {
      const size_t scale_row = static_cast<size_t>((first.cols + 127) / 128) * sizeof(float);
      owned.emplace_back(count);
      uint8_t* codes = owned.back().as<uint8_t>();
      owned.emplace_back(static_cast<size_t>(rows / 128) * scale_row);
      float* scales = owned.back().as<float>();
      size_t code_off = 0, scale_off = 0;
      for (const auto* w : parts) {
        cu::copy_to_device(codes + code_off, w->data, w->bytes());
        cu::copy_to_device(reinterpret_cast<uint8_t*>(scales) + scale_off, w->scales, w->scale_bytes());
        code_off += w->bytes();
        scale_off += w->scale_bytes();
      }
      d.codes = codes;
      d.scales = scales;
      d.bytes = count + static_cast<size_t>(rows / 128) * scale_row;
      any_fp8 = true;
    } else {
      owned.emplace_back(count * sizeof(float));
      float* dst = owned.back().as<float>();
      for (const auto* w : parts) {
        put_floats(dst, *w);
        dst += w->rows * w->cols;
      }
      d.f32 = owned.back().as<float>();
      d.bytes = count * sizeof(float);
    }
    bytes_all += d.bytes;
    return d;
  }

  void matmul(const float* xin, int64_t n, const dev_weight& w, float* y) {
    if (w.codes != nullptr) {
      TROUPE_ASSERT(fp8_ws.size_bytes() >= cu::fp8_workspace_bytes(n, w.cols));  // size_scratch grew it
      cu::matmul_fp8_block(xin, cu::act_type::f32, n, w.codes, w.scales, w.rows, w.cols, y, fp8_ws.data(), stream.get());
      cu::check_launch("matmul_fp8_block");
    } else {
      cu::matmul_f32_cublas(blas, xin, n, w.f32, w.rows, w.cols, y, stream.get());
    }
  }

  // Every buffer a step of n tokens and n_out logits rows touches, at its size, before any launch
  // (so that nothing is reallocated while a graph is being captured).
  void size_scratch(int64_t n, int64_t n_out, int64_t n_logits) {
    const auto fsz = [](int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); };
    const int64_t hidden = cfg.hidden_size, hq = cfg.num_attention_heads, hk = cfg.num_key_value_heads;
    const int64_t d = cfg.head_dim, inter = cfg.intermediate_size;
    grow(x, fsz(n * hidden));
    grow(h, fsz(n * hidden));
    grow(tmp, fsz(n * hidden));
    grow(qkv, fsz(n * (hq + 2 * hk) * d));
    grow(q, fsz(n * hq * d));
    grow(attn, fsz(n * hq * d));
    grow(gu, fsz(n * 2 * inter));
    grow(act, fsz(n * inter));
    if (n_out > 0) grow(fin, fsz(n_out * hidden));
    if (n_logits > 0) grow(logits, fsz(n_logits * cfg.vocab_size));
    if (any_fp8) grow(fp8_ws, cu::fp8_workspace_bytes(std::max(n, n_out), std::max({hidden, inter, hq * d})));
  }

  // The step's launches, all on `stream`, no host synchronization: n tokens whose ids, positions,
  // KV slots and table offsets, then the n_out output rows, then the block tables, lie in `di`
  // (the layout step() writes). Every output row is normed into `fin`; the first n_logits of them
  // also go through lm_head (the others are hidden states, read from `fin`).
  void forward(int64_t n, int64_t n_out, int64_t n_logits, const int32_t* di) {
    const int64_t hidden = cfg.hidden_size, hq = cfg.num_attention_heads, hk = cfg.num_key_value_heads;
    const int64_t d = cfg.head_dim, inter = cfg.intermediate_size;
    const int32_t bs = kv.block_size();
    const float eps = static_cast<float>(cfg.rms_norm_eps);
    const int32_t *ids = di, *positions = di + n, *slots = di + 2 * n, *toffs = di + 3 * n, *out_rows = di + 4 * n,
                  *tables = di + 4 * n + n_out;
    float *xs = x.as<float>(), *hs = h.as<float>(), *ts = tmp.as<float>(), *qs = q.as<float>();
    float *qkvs = qkv.as<float>(), *as = attn.as<float>(), *gus = gu.as<float>(), *acts = act.as<float>();
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const cu::stream_t s = stream.get();
    const int64_t L = cfg.num_hidden_layers;

    cu::embedding_f32(embed.f32, ids, n, hidden, xs, s);
    cu::rmsnorm_f32(xs, layers[0].input_norm, n, hidden, eps, hs, s);
    for (int64_t l = 0; l < L; ++l) {
      const auto& lw = layers[static_cast<size_t>(l)];
      // q, k, v side by side per token (one product) or one after another (three).
      cu::qkv_rows rows{};
      if (lw.qkv.rows > 0) {
        matmul(hs, n, lw.qkv, qkvs);
        const int64_t stride = (hq + 2 * hk) * d;
        rows = {qkvs, stride, qkvs + hq * d, stride, qkvs + (hq + hk) * d, stride};
      } else {
        float *qp = qkvs, *kp = qkvs + n * hq * d, *vp = kp + n * hk * d;
        matmul(hs, n, lw.q, qp);
        matmul(hs, n, lw.k, kp);
        matmul(hs, n, lw.v, vp);
        rows = {qp, hq * d, kp, hk * d, vp, hk * d};
      }
      cu::qkv_finish_f32(rows, n, hq, hk, d, lw.q_norm, lw.k_norm, eps, positions, inv_freq, rope_scale, slots,
                         kv.k(l), kv.v(l), qs, s);
      cu::paged_attention_f32(qs, n, hq, hk, d, kv.k(l), kv.v(l), bs, tables, toffs, positions, scale, as, s);
      matmul(as, n, lw.o, ts);
      cu::add_rmsnorm_f32(xs, ts, lw.post_norm, n, hidden, eps, hs, s);
      if (lw.gate_up.rows > 0) {
        matmul(hs, n, lw.gate_up, gus);
        cu::silu_mul_f32(gus, gus + inter, n, inter, 2 * inter, acts, s);
      } else {
        matmul(hs, n, lw.gate, gus);
        matmul(hs, n, lw.up, gus + n * inter);
        cu::silu_mul_f32(gus, gus + n * inter, n, inter, inter, acts, s);
      }
      matmul(acts, n, lw.down, ts);
      // The residual add, and the next layer's input norm with it.
      if (l + 1 < L)
        cu::add_rmsnorm_f32(xs, ts, layers[static_cast<size_t>(l + 1)].input_norm, n, hidden, eps, hs, s);
      else
        cu::add_inplace_f32(xs, ts, n * hidden, s);
    }
    if (n_out == 0) return;
    float* fs = fin.as<float>();
    cu::gather_rows_f32(xs, out_rows, n_out, hidden, fs, s);
    cu::rmsnorm_f32(fs, final_norm, n_out, hidden, eps, fs, s);
    if (n_logits > 0) matmul(fs, n_logits, lm_head, logits.as<float>());
  }
};

void cuda_model_runner::check_supported(const model_config& config) {
  if (config.arch == architecture::qwen3_moe)
    throw_error(errc::unsupported,
                "cuda_model_runner: Qwen3MoeForCausalLM (MoE) is not supported by the CUDA forward step v0; "
                "only dense Qwen3ForCausalLM runs on CUDA (use the CPU engine, model_runner, for MoE)");
  if (config.num_key_value_heads <= 0 || config.num_attention_heads % config.num_key_value_heads != 0)
    throw_error(errc::unsupported, "cuda_model_runner: num_attention_heads must be a multiple of num_key_value_heads");
  if (config.head_dim <= 0 || config.head_dim % 4 != 0 || config.head_dim > 512)
    throw_error(errc::unsupported, "cuda_model_runner: head_dim must be a multiple of 4 up to 512 (Qwen3's is 128); got " +
                                       std::to_string(config.head_dim));
}

cuda_model_runner::cuda_model_runner(const checkpoint& ckpt, int32_t num_blocks, int32_t block_size,
                                     cuda_runner_options opts) {
  check_supported(ckpt.config);
  // The upload needs lm_head (the server generates too); an embedding-only export runs on the CPU.
  if (ckpt.no_lm_head)
    throw_error(errc::unsupported, "cuda_model_runner: " + ckpt.dir +
                                       " has no lm_head.weight (an embedding-only export); it computes logits");
  // Its logits rows are the vocabulary's width; a classifier's score head is narrower (CPU only).
  if (ckpt.config.num_labels > 0)
    throw_error(errc::unsupported, "cuda_model_runner: " + ckpt.dir + " is a " + model_class_name(ckpt.config) +
                                       "; sequence classifiers run on the CPU (model.device = cpu)");
  if (num_blocks < 1 || block_size < 1)
    throw_error(errc::invalid_argument, "cuda_model_runner: num_blocks and block_size must be >= 1");
  if (cu::device_count() == 0) throw_error(errc::unsupported, "cuda_model_runner: no CUDA device");
  impl_ = std::make_unique<impl>(ckpt, num_blocks, block_size, opts);
}

cuda_model_runner::~cuda_model_runner() = default;

const model_config& cuda_model_runner::config() const noexcept { return impl_->cfg; }
const cuda_kv_pool& cuda_model_runner::kv() const noexcept { return impl_->kv; }
cuda_kv_pool& cuda_model_runner::kv() noexcept { return impl_->kv; }
size_t cuda_model_runner::weight_bytes_per_step() const noexcept { return impl_->bytes_step; }
size_t cuda_model_runner::device_weight_bytes() const noexcept { return impl_->bytes_all; }
bool cuda_model_runner::graphs_enabled() const noexcept { return impl_->graphs_on; }
int64_t cuda_model_runner::graphs_captured() const noexcept { return impl_->captured; }
int64_t cuda_model_runner::stacked_products() const noexcept {
  int64_t n = 0;
  for (const auto& l : impl_->layers) n += (l.qkv.rows > 0) + (l.gate_up.rows > 0);
  return n;
}
int64_t cuda_model_runner::graph_replays() const noexcept { return impl_->replays; }

// The same checks and messages as model_runner (step.hpp).
void cuda_model_runner::validate(const model_config& cfg, int32_t num_blocks, int32_t block_size,
                                 std::span<const step_sequence> batch) {
  validate_step(batch, cfg, num_blocks, block_size);
}

void cuda_model_runner::step(std::span<const step_sequence> batch, step_result& out) {
  auto& m = *impl_;
  const auto& cfg = m.cfg;
  validate(cfg, m.kv.num_blocks(), m.kv.block_size(), batch);
  const int64_t vocab = cfg.vocab_size;
  const int32_t bs = m.kv.block_size();

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
  out.hidden_size = cfg.hidden_size;
  out.hidden_row.assign(batch.size(), -1);
  out.hidden.clear();
  // The output rows: the logits rows in batch order, then the last token of each hidden sequence.
  std::vector<int32_t> rows, hidden_rows;
  {
    int64_t row = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      const int64_t cnt = static_cast<int64_t>(batch[s].tokens.size());
      out.first_row[s] = static_cast<int64_t>(rows.size());
      if (batch[s].logits == logits_mode::last) {
        rows.push_back(static_cast<int32_t>(row + cnt - 1));
      } else if (batch[s].logits == logits_mode::all) {
        for (int64_t t = 0; t < cnt; ++t) rows.push_back(static_cast<int32_t>(row + t));
      } else if (batch[s].logits == logits_mode::hidden) {
        out.hidden_row[s] = static_cast<int64_t>(hidden_rows.size());
        hidden_rows.push_back(static_cast<int32_t>(row + cnt - 1));
      }
      out.num_rows[s] = static_cast<int64_t>(rows.size()) - out.first_row[s];
      row += cnt;
    }
  }
  const int64_t n_logits = static_cast<int64_t>(rows.size());
  const int64_t n_hidden = static_cast<int64_t>(hidden_rows.size());
  rows.insert(rows.end(), hidden_rows.begin(), hidden_rows.end());
  const int64_t n_out = static_cast<int64_t>(rows.size());
  out.logits.resize(static_cast<size_t>(n_logits * vocab));
  out.hidden.resize(static_cast<size_t>(n_hidden * cfg.hidden_size));
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

  const size_t int_bytes = hi.size() * sizeof(int32_t);
  m.size_scratch(n, n_out, n_logits);
  // A decode step replays its batch size's graph (captured now if it has none, or one from
  // before the scratch last grew); anything else launches kernel by kernel.
  bool decode = m.graphs_on && n <= m.max_graph_batch && n_out == n &&
                static_cast<int64_t>(hi.size()) <= m.graph_ints_capacity();
  for (const auto& sq : batch) decode = decode && sq.tokens.size() == 1 && sq.logits == logits_mode::last;
  if (decode) {
    const int32_t* di = m.graph_ints.as<int32_t>();
    cu::copy_to_device_async(m.graph_ints.data(), hi.data(), int_bytes, m.stream);
    auto& slot = m.graphs[static_cast<size_t>(n)];
    if (!slot.g || slot.gen != m.scratch_gen) {
      slot.g = cu::graph();
      slot.g = cu::graph::capture(m.stream, [&] { m.forward(n, n_out, n_logits, di); });
      slot.gen = m.scratch_gen;
      ++m.captured;
    }
    slot.g.launch(m.stream);
    ++m.replays;
  } else {
    m.grow(m.ints, int_bytes);
    cu::copy_to_device_async(m.ints.data(), hi.data(), int_bytes, m.stream);
    m.forward(n, n_out, n_logits, m.ints.as<int32_t>());
  }
  // Waits for the step (a fault in it is reported by it).
  if (n_logits > 0)
    cu::copy_to_host_async(out.logits.data(), m.logits.data(), static_cast<size_t>(n_logits * vocab) * sizeof(float),
                           m.stream);
  if (n_hidden > 0)
    cu::copy_to_host_async(out.hidden.data(), m.fin.as<float>() + n_logits * cfg.hidden_size,
                           out.hidden.size() * sizeof(float), m.stream);
  m.stream.synchronize();
}

}  // namespace troupe
