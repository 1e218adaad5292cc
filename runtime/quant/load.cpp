// load_model: float checkpoints go through load_checkpoint (then quantize_weights when asked);
// checkpoints whose config.json holds a quantization_config are read here, tensor by tensor
// against the architecture's list exactly as load_checkpoint does, with each I8 / F8_E4M3 weight
// bound to its scale tensor in place in the mapping. Nothing is copied unless it must be (a
// misaligned tensor, BF16 / F16 scales widened to float32).
#include "runtime/quant/load.hpp"
#include "runtime/model/generation_source.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/tensor_layout.hpp"
#include "runtime/quant/packed_int.hpp"
#include "runtime/quant/quantize.hpp"
#include "runtime/model/weight_files.hpp"

namespace troupe::quant {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool is_float(dtype t) { return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16; }

const char* codes_dtype(method m) { return m == method::fp8 ? "F8_E4M3" : "I8"; }

// The shape of a quantized weight's scales.
std::vector<int64_t> scale_shape(const quant_config& q, int64_t rows, int64_t cols) {
  if (q.kind == method::fp8) return {(rows + q.block_rows - 1) / q.block_rows, (cols + q.block_cols - 1) / q.block_cols};
  const int64_t g = int8_group_cols(q.group_size, cols);
  return {rows, (cols + g - 1) / g};
}

bool ignorable(std::string_view name, const model_config& c) {
  constexpr std::string_view inv_freq = ".rotary_emb.inv_freq";
  if (name.size() >= inv_freq.size() && name.substr(name.size() - inv_freq.size()) == inv_freq) return true;
  return c.tie_word_embeddings && name == "lm_head.weight";
}

// Drops the pages wholly inside [p, p + bytes) of a checkpoint file's mapping from the resident set.
void drop_mapped_pages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

std::unique_ptr<checkpoint> load_prequantized(const std::string& dir, const fs::path& config_path,
                                              const std::string& config_text, const quant_config& q,
                                              residency where, bool four_bit) {
  auto ck = std::make_unique<checkpoint>();
  ck->dir = dir;
  const fs::path root(dir);
  ck->config = parse_model_config(config_text, config_path.string());
  const model_config& c = ck->config;
  std::error_code ec;
  const fs::path gen_path = root / "generation_config.json";
  if (fs::exists(gen_path, ec)) ck->generation = parse_generation_config(read_text(gen_path), gen_path.string());
  if (ck->generation.eos_token_ids.empty()) ck->generation.eos_token_ids = c.eos_token_ids;

  weight_files wf = open_weights(root, where);
  const std::vector<expected_tensor> expected = expected_tensors(c);
  model_weights& w = ck->weights;
  shape_weights(w, c);
  std::unordered_set<std::string> wanted;
  std::string path, scale_path;
  for (const auto& t : expected) {
    wanted.insert(t.name);
    if (q.source != int8_source::troupe && !t.is_norm() && has_packed_weight(wf, t.name)) {
      if (t.kind == tensor_kind::embed_tokens)
        throw_error(errc::unsupported, dir + ": '" + t.name + "' is stored packed (" + packed_tensor_names(t.name)[0] +
                                           "); embedding tables must stay F32, F16 or BF16");
      quantized_weight g = q.source == int8_source::gptq
                               ? read_gptq_weight(wf, t.name, t.shape[0], t.shape[1], q, four_bit)
                               : read_awq_weight(wf, t.name, t.shape[0], t.shape[1], q, four_bit);
      // The packed words (GPTQ, AWQ) are never read again: they leave the resident set at once, so that the
      // load peaks at the INT8 model plus one packed weight, not both models.
      std::vector<std::string> names = packed_tensor_names(t.name);
      if (q.source == int8_source::awq) names.pop_back();  // AWQ has no g_idx
      for (const auto& n : names) {
        wanted.insert(n);
        if (const tensor_info* packed = wf.find(n, path)) drop_mapped_pages(packed->data, packed->bytes());
      }
      ck->owned.push_back(g.codes);
      ck->owned.push_back(g.scales);
      if (g.zeros) ck->owned.push_back(g.zeros);
      *weight_slot(w, t) = g.ref;
      continue;
    }
    const tensor_info* info = wf.find(t.name, path);
    const std::string expect = "expected " + std::string(t.is_norm() ? "F32, F16 or BF16" : "F32, F16, BF16 or quantized ") +
                               (t.is_norm() ? "" : codes_dtype(q.kind)) + " with shape " + shape_string(t.shape) +
                               " from config.json";
    if (!info)
      throw_error(errc::invalid_checkpoint,
                  path + ": missing tensor '" + t.name + "'" +
                      (q.source != int8_source::troupe && !t.is_norm() ? " (or the packed '" + packed_tensor_names(t.name)[0] + "')" : "") +
                      "; " + expect);
    if (info->shape != t.shape)
      throw_error(errc::invalid_checkpoint,
                  path + ": tensor '" + t.name + "' has shape " + shape_string(info->shape) + "; " + expect);
    if (t.is_norm()) {
      if (!is_float(info->type))
        throw_error(errc::unsupported, path + ": tensor '" + t.name + "' has dtype " +
                                           std::string(to_string(info->type)) + "; " + expect);
      *norm_slot(w, t) = widen_to_f32(*info);
      continue;
    }
    const void* data = info->data;
    if (reinterpret_cast<uintptr_t>(data) % dtype_size(info->type) != 0) {
      auto& copy = ck->aligned_copies.emplace_back((info->bytes() + 7) / 8);
      std::memcpy(copy.data(), data, info->bytes());
      data = copy.data();
    }
    kernels::weight_ref ref{data, info->type, t.shape[0], t.shape[1]};
    if (!is_float(info->type)) {
      const dtype want = q.kind == method::fp8 ? dtype::f8_e4m3 : dtype::i8;
      if (info->type != want)
        throw_error(errc::unsupported, path + ": tensor '" + t.name + "' has dtype " +
                                           std::string(to_string(info->type)) + " but quantization_config names " +
                                           (q.kind == method::fp8 ? "fp8" : "troupe_int8") + "; " + expect);
      if (t.kind == tensor_kind::embed_tokens)
        throw_error(errc::unsupported, path + ": tensor '" + t.name + "' is quantized (" +
                                           std::string(to_string(info->type)) +
                                           "); embedding tables must stay F32, F16 or BF16");
      const std::string sname = scale_tensor_name(t.name, q.kind);
      const std::vector<int64_t> sshape = scale_shape(q, t.shape[0], t.shape[1]);
      const std::string sexpect = "expected F32 (or BF16 / F16) with shape " + shape_string(sshape) + ", the " +
                                  (q.kind == method::fp8 ? "block scales" : "per-group scales") + " of '" + t.name + "'";
      const tensor_info* s = wf.find(sname, scale_path);
      if (!s) throw_error(errc::invalid_checkpoint, scale_path + ": missing tensor '" + sname + "'; " + sexpect);
      if (!is_float(s->type))
        throw_error(errc::invalid_checkpoint, scale_path + ": tensor '" + sname + "' has dtype " +
                                                  std::string(to_string(s->type)) + "; " + sexpect);
      if (s->shape != sshape)
        throw_error(errc::invalid_checkpoint,
                    scale_path + ": tensor '" + sname + "' has shape " + shape_string(s->shape) + "; " + sexpect);
      wanted.insert(sname);
      if (s->type == dtype::f32 && reinterpret_cast<uintptr_t>(s->data) % 4 == 0) {
        ref.scales = reinterpret_cast<const float*>(s->data);
      } else {
        auto widened = std::make_shared<std::vector<float>>(widen_to_f32(*s));
        ref.scales = widened->data();
        ck->owned.push_back(widened);
      }
      if (q.kind == method::fp8) {
        ref.group_rows = q.block_rows;
        ref.group_cols = q.block_cols;
      } else {
        ref.group_rows = 1;
        ref.group_cols = static_cast<int32_t>(int8_group_cols(q.group_size, t.shape[1]));
      }
    } else if (info->type != dtype::f32 && info->type != dtype::bf16 && info->type != dtype::f16) {
      throw_error(errc::unsupported, path + ": tensor '" + t.name + "' has dtype " + std::string(to_string(info->type)) +
                                         "; " + expect);
    }
    *weight_slot(w, t) = ref;
  }
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;

  auto unexpected = [&](const std::string& where, const std::string& name) {
    throw_error(errc::invalid_checkpoint,
                where + ": unexpected tensor '" + name + "'; expected only the tensors of a " + architecture_name(c.arch) +
                    " with config.json's shape (" + std::to_string(c.num_hidden_layers) + " layers" +
                    (c.tie_word_embeddings ? ", tied embeddings" : ", untied lm_head") + ") and the " +
                    (q.source == int8_source::gptq  ? "qweight, qzeros, scales and g_idx"
                     : q.source == int8_source::awq ? "qweight, qzeros and scales"
                     : q.kind == method::fp8       ? "weight_scale_inv"
                                                   : "weight_scale") +
                    " of each quantized weight");
  };
  for (const auto& [stored, file] : wf.placement)
    if (const auto name = wf.causal_lm_name(stored); !wanted.count(name) && !ignorable(name, c)) unexpected(wf.index_path, stored);
  for (const auto& f : wf.files)
    for (const auto& t : f.tensors())
      if (const auto name = wf.causal_lm_name(t.name); !wanted.count(name) && !ignorable(name, c)) unexpected(f.path(), t.name);

  for (auto& f : wf.files) ck->files.push_back(std::move(f).release_mapping());
  if (q.source != int8_source::troupe)
    ck->stored_as = std::string(q.source == int8_source::gptq ? "GPTQ " : "AWQ ") + std::to_string(q.bits) + "-bit";
  account_weight_bytes(*ck);
  return ck;
}

// Drops the pages of [p, p + bytes) that lie wholly inside it from the resident set, when the
// range belongs to one of the checkpoint's read-only file mappings (never heap memory).
// still_read: the bytes are read again later (a tied embedding table): only a file mapping may drop
// them, since the kernel reads them back from the file; a huge-page copy would read back zeros.
void release_pages(const checkpoint& ck, const void* p, size_t bytes, bool still_read) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (const auto& f : ck.files) {
    if (b < f.data() || b + bytes > f.data() + f.size()) continue;
    if (still_read && f.is_copy()) return;
    drop_mapped_pages(b, bytes);
    return;
  }
}

}  // namespace

quant_config weight_quantization(const checkpoint& ck) {
  // The method of the first quantized weight; INT8's group size is the group of any weight with
  // more columns than one group (when none has, one scale per row is the same thing).
  quant_config q;
  for (const auto& t : expected_tensors(ck.config)) {
    const kernels::weight_ref* r = weight_slot(ck.weights, t);
    if (!r || !r->scales) continue;
    if (q.kind == method::none) {
      q.kind = r->type == dtype::f8_e4m3 ? method::fp8 : method::int8;
      q.group_size = 0;
      q.block_rows = r->group_rows;
      q.block_cols = r->group_cols;
    }
    if (q.kind == method::int8 && r->group_cols < r->cols) q.group_size = r->group_cols;
    if (r->type == dtype::u4) q.bits = 4;  // 4-bit codes in memory (GPTQ / AWQ), INT8's values
  }
  return q;
}

std::string kernel_arithmetic(const checkpoint& ck) {
  const method m = weight_quantization(ck).kind;
  if (m == method::none) return "";
  return std::string(m == method::int8 ? "int8-" : "fp8-") + kernels::quant_arithmetic();
}

void quantize_weights(checkpoint& ck, const load_options& o) {
  if (o.quantization == method::none) return;
  const bool head = o.quantize_lm_head.value_or(o.quantization == method::int8);
  auto quantize = [&](kernels::weight_ref& r, bool still_read) {
    if (!is_float(r.type)) return;
    // The codes go on 2 MB pages (quantized_buffer), for ~0.5 s more load (pages zeroed and compacted).
    quantized_weight q = o.quantization == method::int8 ? quantize_int8(r, o.group_size)
                                                        : quantize_fp8(r, o.block_rows, o.block_cols);
    if (o.release_source_pages) release_pages(ck, r.data, r.bytes(), still_read);
    r = q.ref;
    ck.owned.push_back(q.codes);
    ck.owned.push_back(q.scales);
  };
  for (auto& l : ck.weights.layers) {
    for (auto* r : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      if (r->data) quantize(*r, false);
    for (auto& e : l.experts)
      for (auto* r : {&e.gate_proj, &e.up_proj, &e.down_proj}) quantize(*r, false);
  }
  if (head && is_float(ck.weights.lm_head.type)) {
    const bool tied = ck.config.tie_word_embeddings;
    quantize(ck.weights.lm_head, tied);
    // A quantized copy of the embedding table is an untied output projection from now on; the
    // table itself is read a row per token, so its pages need not stay resident.
    if (tied) ck.config.tie_word_embeddings = false;
  }
  account_weight_bytes(ck);
}

namespace {

// The checkpoint as stored (float, quantized on load, or pre-quantized), before any override.
std::unique_ptr<checkpoint> load_weights(const std::string& dir, const load_options& o) {
  const fs::path config_path = fs::path(dir) / "config.json";
  std::error_code ec;
  json j;
  bool quantized = false;
  if (fs::is_directory(dir, ec) && fs::exists(config_path, ec)) {
    try {
      j = json::parse(read_text(config_path));
      quantized = j.is_object() && j.contains("quantization_config") && !j["quantization_config"].is_null();
    } catch (const json::exception&) {
      // load_checkpoint reports malformed JSON with its usual message.
    }
  }
  if (!quantized) {
    auto ck = load_checkpoint(dir, o.weights);
    quantize_weights(*ck, o);
    return ck;
  }
  const quant_config q = parse_quant_config(j["quantization_config"].dump(), config_path.string());
  if (o.quantization != method::none && o.quantization != q.kind)
    throw_error(errc::invalid_argument, dir + " is already quantized (" + method_name(q.kind) +
                                            "); --quantization " + method_name(o.quantization) +
                                            " would quantize it twice: load it as stored, or quantize the float checkpoint");
  j.erase("quantization_config");
  return load_prequantized(dir, config_path, j.dump(), q, o.weights, o.four_bit_codes);
}

}  // namespace

std::unique_ptr<checkpoint> load_model(const std::string& dir, const load_options& o) {
  auto ck = load_weights(dir, o);
  if (!o.rope_scaling.empty()) override_rope_scaling(ck->config, o.rope_scaling, "--rope-scaling");
  if (o.generation_config != "auto" || !o.override_generation_config.empty())
    ck->generation = resolve_generation_config(dir, o.generation_config, o.override_generation_config,
                                               ck->config.eos_token_ids);
  return ck;
}

}  // namespace troupe::quant
