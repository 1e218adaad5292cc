#include "runtime/model/shard.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>

#include "runtime/core/error.hpp"
#include "runtime/core/numa_nodes.hpp"

namespace troupe {

namespace {

std::string layer_name(int64_t l, const char* part) {
  return "model.layers." + std::to_string(l) + "." + part + ".weight";
}

std::string expert_name(int64_t l, int64_t e, const char* part) {
  return "model.layers." + std::to_string(l) + ".mlp.experts." + std::to_string(e) + "." + part + ".weight";
}

[[noreturn]] void refuse(int32_t size, const std::string& what) {
  throw_error(errc::unsupported, "tensor_parallel_size " + std::to_string(size) + ": " + what);
}

// Rows [r0, r0 + n) must not cut a block of scales (FP8: 128 rows share one).
void check_rows(const kernels::weight_ref& w, int64_t r0, int64_t n, int32_t size, const std::string& name) {
  if (w.group_rows > 1 && (r0 % w.group_rows != 0 || ((r0 + n) % w.group_rows != 0 && r0 + n != w.rows)))
    refuse(size, name + ": a slice of " + std::to_string(n) + " rows at row " + std::to_string(r0) +
                     " cuts its scale blocks of " + std::to_string(w.group_rows) + " rows");
}

// Columns [c0, c0 + n) must hold whole scale groups (and whole 16-column words of u4 codes).
void check_cols(const kernels::weight_ref& w, int64_t c0, int64_t n, int32_t size, const std::string& name) {
  // One scale per row (per output channel) covers any slice of its columns.
  const int64_t g = w.group_cols > 0 && w.group_cols < w.cols ? w.group_cols : 1;
  const int64_t a = w.type == dtype::u4 ? std::max<int64_t>(g, 16) : g;
  if (c0 % a != 0 || (n % a != 0 && c0 + n != w.cols))
    refuse(size, name + ": a slice of " + std::to_string(n) + " columns at column " + std::to_string(c0) +
                     " cuts its scale groups of " + std::to_string(a) + " columns");
}

}  // namespace

kernels::weight_ref slice_rows(const kernels::weight_ref& w, int64_t r0, int64_t n) {
  kernels::weight_ref s = w;
  s.rows = n;
  s.data = static_cast<const uint8_t*>(w.data) + r0 * w.row_bytes();
  const int64_t gr = w.group_rows > 0 ? w.group_rows : 1;
  if (w.scales) s.scales = w.scales + (r0 / gr) * w.scale_cols();
  if (w.zeros) s.zeros = w.zeros + (r0 / gr) * w.scale_cols();
  return s;
}

namespace {
std::shared_ptr<uint8_t> aligned_bytes(size_t n) {
  return {static_cast<uint8_t*>(::operator new(std::max<size_t>(n, 1), std::align_val_t{64})),
          [](uint8_t* p) { ::operator delete(p, std::align_val_t{64}); }};
}

}  // namespace

kernels::weight_ref copy_columns(const kernels::weight_ref& w, int64_t c0, int64_t n,
                              std::vector<std::shared_ptr<const void>>& owned) {
  kernels::weight_ref s = w;
  s.cols = n;
  const int64_t src_row = w.row_bytes(), dst_row = s.row_bytes();
  const int64_t skip = w.type == dtype::u4 ? c0 / 2 : c0 * static_cast<int64_t>(dtype_size(w.type));
  auto data = aligned_bytes(static_cast<size_t>(w.rows * dst_row));
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r) std::memcpy(data.get() + r * dst_row, src + r * src_row + skip, static_cast<size_t>(dst_row));
  s.data = data.get();
  owned.push_back(data);
  if (w.group_cols > 0) {
    if (w.group_cols >= w.cols) s.group_cols = static_cast<int32_t>(n);  // per output channel
    const int64_t g0 = c0 / w.group_cols, gw = s.scale_cols(), gs = w.scale_cols();
    if (w.scales) {
      auto sc = aligned_bytes(static_cast<size_t>(w.scale_rows() * gw) * sizeof(float));
      auto* out = reinterpret_cast<float*>(sc.get());
      for (int64_t r = 0; r < w.scale_rows(); ++r) std::memcpy(out + r * gw, w.scales + r * gs + g0, static_cast<size_t>(gw) * sizeof(float));
      s.scales = out;
      owned.push_back(sc);
    }
    if (w.zeros) {
      auto z = aligned_bytes(static_cast<size_t>(w.scale_rows() * gw));
      for (int64_t r = 0; r < w.scale_rows(); ++r) std::memcpy(z.get() + r * gw, w.zeros + r * gs + g0, static_cast<size_t>(gw));
      s.zeros = z.get();
      owned.push_back(z);
    }
  }
  return s;
}

std::vector<int64_t> pipeline_layer_bounds(const checkpoint& full, int32_t stages, std::span<const int64_t> layers) {
  const int64_t n = full.config.num_hidden_layers;
  if (stages < 1) throw_error(errc::invalid_argument, "pipeline_parallel_size must be >= 1 (got " + std::to_string(stages) + ")");
  if (stages > n)
    throw_error(errc::invalid_argument, "pipeline_parallel_size " + std::to_string(stages) + " is more than the model's " +
                                            std::to_string(n) + " layers (num_hidden_layers); each stage needs one");
  std::vector<int64_t> bounds{0};
  if (!layers.empty()) {
    if (static_cast<int64_t>(layers.size()) != stages)
      throw_error(errc::invalid_argument, "pipeline_layers has " + std::to_string(layers.size()) +
                                              " counts; pipeline_parallel_size is " + std::to_string(stages));
    for (int64_t k : layers) {
      if (k < 1) throw_error(errc::invalid_argument, "pipeline_layers: a stage of " + std::to_string(k) + " layers; each needs one");
      bounds.push_back(bounds.back() + k);
    }
    if (bounds.back() != n)
      throw_error(errc::invalid_argument, "pipeline_layers adds up to " + std::to_string(bounds.back()) +
                                              " layers; the model has " + std::to_string(n) + " (num_hidden_layers)");
    return bounds;
  }
  // vLLM's split (get_pp_indices): L / S layers each, the remainder one more each for the stages
  // just before the last, which also runs the final norm and lm_head.
  std::vector<int64_t> counts(static_cast<size_t>(stages), n / stages);
  for (int64_t i = 0; i < n % stages; ++i) ++counts[counts.size() - 2 - static_cast<size_t>(i)];
  for (int64_t k : counts) bounds.push_back(bounds.back() + k);
  return bounds;
}

std::vector<int64_t> parse_pipeline_layers(std::string_view text, std::string_view option) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t at = 0;
  for (;;) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 1)
      throw_error(errc::invalid_argument, std::string(option) + ": '" + std::string(text) +
                                              "' is not a comma-separated list of layer counts (each >= 1), e.g. 10,8,10");
    out.push_back(v);
    if (comma == text.size()) return out;
    at = comma + 1;
  }
}

pipeline_schedule parse_pipeline_schedule(std::string_view text, std::string_view option) {
  if (text == "auto") return pipeline_schedule::automatic;
  if (text == "wavefront") return pipeline_schedule::wavefront;
  if (text == "in_turn") return pipeline_schedule::in_turn;
  throw_error(errc::invalid_argument,
              std::string(option) + ": '" + std::string(text) + "' is not one of auto, wavefront, in_turn");
}

const char* to_string(pipeline_schedule s) noexcept {
  switch (s) {
    case pipeline_schedule::wavefront: return "wavefront";
    case pipeline_schedule::in_turn: return "in_turn";
    default: return "auto";
  }
}

pipeline_schedule resolved_schedule(const parallel_config& p) {
  if (p.pipeline_size < 2) return pipeline_schedule::in_turn;
  if (p.schedule != pipeline_schedule::automatic) return p.schedule;
  return numa_node_count() >= p.pipeline_size ? pipeline_schedule::wavefront : pipeline_schedule::in_turn;
}

void check_parallel(const checkpoint& full, const parallel_config& p) {
  check_shardable(full, p);
  pipeline_layer_bounds(full, p.pipeline_size, p.pipeline_layers);
  if (p.threads > 0 && p.threads < p.pipeline_size * p.size)
    throw_error(errc::invalid_argument, "threads (" + std::to_string(p.threads) + ") is fewer than pipeline_parallel_size x " +
                                            "tensor_parallel_size (" + std::to_string(p.pipeline_size * p.size) +
                                            "); each stage's every rank needs a thread of its own");
}

int64_t vocab_range_begin(const checkpoint& full, int32_t rank, int32_t size) {
  const int64_t v = full.weights.lm_head.rows;
  const int64_t a = full.weights.lm_head.group_rows > 1 ? full.weights.lm_head.group_rows : 1;
  const int64_t units = (v + a - 1) / a;
  return std::min(v, units * rank / size * a);
}

bool splits_experts(const model_config& c, const parallel_config& p) {
  if (p.size < 2 || !p.expert_parallel) return false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_is_moe(l)) return true;
  return false;
}

void check_shardable(const checkpoint& full, const parallel_config& p) {
  const int32_t size = p.size;
  if (size < 1) throw_error(errc::invalid_argument, "tensor_parallel_size must be >= 1 (got " + std::to_string(size) + ")");
  if (p.threads < 0) throw_error(errc::invalid_argument, "threads must be >= 0 (got " + std::to_string(p.threads) + "; 0 = every core)");
  if (p.threads > 0 && p.threads < size)
    throw_error(errc::invalid_argument, "threads (" + std::to_string(p.threads) + ") is fewer than tensor_parallel_size (" +
                                            std::to_string(size) + "); each shard needs a thread of its own");
  if (size == 1) return;
  const model_config& c = full.config;
  auto divides = [&](int64_t value, const char* field) {
    if (value % size != 0)
      refuse(size, std::string(field) + " (" + std::to_string(value) + ") is not a multiple of it; each rank needs an equal share");
  };
  divides(c.num_attention_heads, "num_attention_heads");
  // Fewer KV heads than ranks: each rank a replica of its query heads' KV head (vLLM's way).
  if (c.num_key_value_heads <= 0 || (c.num_key_value_heads % size != 0 && size % c.num_key_value_heads != 0))
    refuse(size, "num_key_value_heads (" + std::to_string(c.num_key_value_heads) +
                     ") is neither a multiple nor a divisor of it; each rank needs an equal share of the KV heads, or one "
                     "replicated head");
  bool dense = false, moe = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) (c.layer_is_moe(l) ? moe : dense) = true;
  if (dense) divides(c.intermediate_size, "intermediate_size");
  if (moe && !p.expert_parallel) divides(c.moe_intermediate_size, "moe_intermediate_size");
  if (moe && p.expert_parallel && c.num_experts < size)
    refuse(size, "num_experts (" + std::to_string(c.num_experts) +
                     ") is smaller than the group; expert parallelism gives each rank at least one expert");
  // A classifier's few labels may leave ranks without a score row (vocab_range_begin): those
  // compute no logits, and the group's row is the other ranks' columns.
  if (c.num_labels == 0 && full.weights.lm_head.rows < size) refuse(size, "the vocabulary is smaller than the group");
  const int64_t d = c.head_dim;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const auto& lw = full.weights.layers[static_cast<size_t>(l)];
    const int64_t q = c.num_attention_heads / size * d, kv = kv_heads_per_rank(c.num_key_value_heads, size) * d;
    for (int32_t r = 0; r < size; ++r) {
      const int64_t kv0 = kv_head_begin(c.num_key_value_heads, r, size) * d;
      check_rows(lw.q_proj, r * q, q, size, layer_name(l, "self_attn.q_proj"));
      check_rows(lw.k_proj, kv0, kv, size, layer_name(l, "self_attn.k_proj"));
      check_rows(lw.v_proj, kv0, kv, size, layer_name(l, "self_attn.v_proj"));
      check_cols(lw.o_proj, r * q, q, size, layer_name(l, "self_attn.o_proj"));
      if (!c.layer_is_moe(l)) {
        const int64_t i = c.intermediate_size / size;
        check_rows(lw.gate_proj, r * i, i, size, layer_name(l, "mlp.gate_proj"));
        check_rows(lw.up_proj, r * i, i, size, layer_name(l, "mlp.up_proj"));
        check_cols(lw.down_proj, r * i, i, size, layer_name(l, "mlp.down_proj"));
      } else if (!p.expert_parallel) {  // whole experts cut no scale group
        const int64_t i = c.moe_intermediate_size / size;
        for (size_t e = 0; e < lw.experts.size(); ++e) {
          const auto& ew = lw.experts[e];
          check_rows(ew.gate_proj, r * i, i, size, expert_name(l, static_cast<int64_t>(e), "gate_proj"));
          check_rows(ew.up_proj, r * i, i, size, expert_name(l, static_cast<int64_t>(e), "up_proj"));
          check_cols(ew.down_proj, r * i, i, size, expert_name(l, static_cast<int64_t>(e), "down_proj"));
        }
      }
    }
  }
}

std::unique_ptr<checkpoint> shard_checkpoint(const checkpoint& full, int32_t rank, const parallel_config& p,
                                             int64_t first_layer, int64_t end_layer) {
  check_shardable(full, p);
  const int32_t size = p.size;
  if (rank < 0 || rank >= size)
    throw_error(errc::invalid_argument, "shard_checkpoint: rank " + std::to_string(rank) + " outside a group of " + std::to_string(size));
  auto s = std::make_unique<checkpoint>();
  s->dir = full.dir;
  s->config = full.config;
  s->generation = full.generation;
  s->stored_as = full.stored_as;
  s->no_lm_head = full.no_lm_head;
  model_config& c = s->config;
  c.num_attention_heads /= size;
  const int64_t kv_first = kv_head_begin(c.num_key_value_heads, rank, size);
  c.num_key_value_heads = kv_heads_per_rank(c.num_key_value_heads, size);
  c.intermediate_size /= size;
  if (!p.expert_parallel) c.moe_intermediate_size /= size;
  const int64_t d = c.head_dim;
  const int64_t q = c.num_attention_heads * d, kv = c.num_key_value_heads * d;
  const auto& fw = full.weights;
  model_weights& w = s->weights;
  w.embed_tokens = fw.embed_tokens;
  const int64_t v0 = vocab_range_begin(full, rank, size), v1 = vocab_range_begin(full, rank + 1, size);
  w.lm_head = slice_rows(fw.lm_head, v0, v1 - v0);
  w.norm = fw.norm;
  w.layers.resize(fw.layers.size());
  const auto end = end_layer < 0 ? fw.layers.size() : static_cast<size_t>(end_layer);
  for (size_t l = static_cast<size_t>(std::max<int64_t>(first_layer, 0)); l < end; ++l) {
    const auto& f = fw.layers[l];
    auto& o = w.layers[l];
    o.q_proj = slice_rows(f.q_proj, rank * q, q);
    o.k_proj = slice_rows(f.k_proj, kv_first * d, kv);
    o.v_proj = slice_rows(f.v_proj, kv_first * d, kv);
    o.o_proj = copy_columns(f.o_proj, rank * q, q, s->owned);
    o.q_norm = f.q_norm;
    o.k_norm = f.k_norm;
    o.input_layernorm = f.input_layernorm;
    o.post_attention_layernorm = f.post_attention_layernorm;
    if (!c.layer_is_moe(static_cast<int64_t>(l))) {
      const int64_t i = c.intermediate_size;
      o.gate_proj = slice_rows(f.gate_proj, rank * i, i);
      o.up_proj = slice_rows(f.up_proj, rank * i, i);
      o.down_proj = copy_columns(f.down_proj, rank * i, i, s->owned);
    } else if (p.expert_parallel) {
      o.router = f.router;
      o.experts.resize(f.experts.size());  // the others stay empty
      const auto n = static_cast<int64_t>(f.experts.size());
      for (int64_t e = expert_range_begin(n, rank, size); e < expert_range_begin(n, rank + 1, size); ++e)
        o.experts[static_cast<size_t>(e)] = f.experts[static_cast<size_t>(e)];
    } else {
      const int64_t i = c.moe_intermediate_size;
      o.router = f.router;
      o.experts.resize(f.experts.size());
      for (size_t e = 0; e < f.experts.size(); ++e) {
        o.experts[e].gate_proj = slice_rows(f.experts[e].gate_proj, rank * i, i);
        o.experts[e].up_proj = slice_rows(f.experts[e].up_proj, rank * i, i);
        o.experts[e].down_proj = copy_columns(f.experts[e].down_proj, rank * i, i, s->owned);
      }
    }
  }
  // weights.bytes / active_bytes / num_parameters stay 0: the full checkpoint's figures describe
  // the model.
  return s;
}

}  // namespace troupe
