// load_checkpoint: config -> expected tensor list -> safetensors headers (single file or shards)
// -> checks (presence, dtype, exact shape, nothing unexpected) -> weight_refs into the mappings.
// Weight pages are never touched here, so loading costs the headers and the norms only.
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include "kernels/u4_layout.hpp"
#include "runtime/core/error.hpp"
#include "runtime/model/checkpoint.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/tensor_layout.hpp"
#include "runtime/model/weight_files.hpp"

namespace troupe {

namespace fs = std::filesystem;

namespace {

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// The shape an error message explains, in config.json's words.
const char* shape_meaning(tensor_kind k) {
  switch (k) {
    case tensor_kind::embed_tokens: case tensor_kind::lm_head: return "[vocab_size, hidden_size]";
    case tensor_kind::final_norm: case tensor_kind::input_layernorm:
    case tensor_kind::post_attention_layernorm: return "[hidden_size]";
    case tensor_kind::q_norm: case tensor_kind::k_norm: return "[head_dim]";
    case tensor_kind::q_proj: return "[num_attention_heads * head_dim, hidden_size]";
    case tensor_kind::k_proj: case tensor_kind::v_proj:
      return "[num_key_value_heads * head_dim, hidden_size]";
    case tensor_kind::o_proj: return "[hidden_size, num_attention_heads * head_dim]";
    case tensor_kind::gate_proj: case tensor_kind::up_proj: return "[intermediate_size, hidden_size]";
    case tensor_kind::down_proj: return "[hidden_size, intermediate_size]";
    case tensor_kind::router: return "[num_experts, hidden_size]";
    case tensor_kind::expert_gate_proj: case tensor_kind::expert_up_proj:
      return "[moe_intermediate_size, hidden_size]";
    case tensor_kind::expert_down_proj: return "[hidden_size, moe_intermediate_size]";
  }
  return "";
}

std::string expectation(const expected_tensor& t) {
  const char* meaning = t.name == "score.weight" ? "[num_labels, hidden_size]" : shape_meaning(t.kind);
  return "expected F32, F16 or BF16 with shape " + shape_string(t.shape) + " = " + meaning + " from config.json";
}

bool ignorable(std::string_view name, const model_config& c) {
  // Rotary inverse frequencies are recomputed from rope_theta; old exports saved them.
  constexpr std::string_view inv_freq = ".rotary_emb.inv_freq";
  if (name.size() >= inv_freq.size() && name.substr(name.size() - inv_freq.size()) == inv_freq)
    return true;
  // A tied checkpoint may still carry the copy (Qwen3-0.6B does); transformers uses embed_tokens.
  return c.tie_word_embeddings && name == "lm_head.weight";
}

// Where tensor t lives (weight_files.hpp), or an error naming the file or index that lacks it and
// what was expected there.
const tensor_info* locate(const weight_files& wf, const expected_tensor& t, std::string& file_path) {
  const tensor_info* info = wf.find(t.name, file_path);
  if (info) return info;
  const std::string name = wf.stored_name(t.name);
  if (wf.index_path.empty())
    throw_error(errc::invalid_checkpoint, file_path + ": missing tensor '" + name + "'; " + expectation(t));
  if (file_path == wf.index_path)
    throw_error(errc::invalid_checkpoint,
                wf.index_path + ": missing tensor '" + name + "' (not in weight_map); " + expectation(t));
  throw_error(errc::invalid_checkpoint,
              file_path + ": missing tensor '" + name + "', which " + fs::path(wf.index_path).filename().string() +
                  " places in this file; " + expectation(t));
}

}  // namespace

std::string directory_name(const std::string& dir) {
  const fs::path p = fs::path(dir).lexically_normal();
  const std::string name = p.filename().string();
  return name.empty() ? p.parent_path().filename().string() : name;
}

std::unique_ptr<checkpoint> load_checkpoint(const std::string& dir, residency where) {
  auto ck = std::make_unique<checkpoint>();
  ck->dir = dir;
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw_error(errc::invalid_checkpoint,
                dir + ": not a directory; expected a Hugging Face checkpoint directory");
  const fs::path config_path = root / "config.json";
  if (!path_exists(config_path))
    throw_error(errc::invalid_checkpoint, config_path.string() +
                                              ": not found; expected the config.json of a "
                                              "Qwen3ForCausalLM or Qwen3MoeForCausalLM model");
  ck->config = parse_model_config(read_text(config_path), config_path.string());
  const model_config& c = ck->config;
  const fs::path gen_path = root / "generation_config.json";
  if (path_exists(gen_path)) ck->generation = parse_generation_config(read_text(gen_path), gen_path.string());
  if (ck->generation.eos_token_ids.empty()) ck->generation.eos_token_ids = c.eos_token_ids;

  weight_files wf = open_weights(root, where);
  const std::vector<expected_tensor> expected = expected_tensors(c);
  model_weights& w = ck->weights;
  shape_weights(w, c);

  std::string file_path;
  ck->no_lm_head = c.num_labels == 0 && wf.bare_model && !c.tie_word_embeddings && !wf.find("lm_head.weight", file_path);
  for (const auto& t : expected) {
    if (t.kind == tensor_kind::lm_head && ck->no_lm_head) continue;
    const tensor_info* info = locate(wf, t, file_path);
    if (info->type != dtype::f32 && info->type != dtype::f16 && info->type != dtype::bf16)
      throw_error(errc::unsupported, file_path + ": tensor '" + wf.stored_name(t.name) + "' has dtype " +
                                         std::string(to_string(info->type)) + "; " + expectation(t));
    if (info->shape != t.shape)
      throw_error(errc::invalid_checkpoint, file_path + ": tensor '" + wf.stored_name(t.name) + "' has shape " +
                                                shape_string(info->shape) + "; " + expectation(t));
    if (t.is_norm()) {
      *norm_slot(w, t) = widen_to_f32(*info);
      continue;
    }
    const void* data = info->data;
    if (reinterpret_cast<uintptr_t>(data) % dtype_size(info->type) != 0) {
      // Misaligned element access is undefined behaviour in scalar kernels: copy this one.
      auto& copy = ck->aligned_copies.emplace_back((info->bytes() + 7) / 8);
      std::memcpy(copy.data(), data, info->bytes());
      data = copy.data();
    }
    *weight_slot(w, t) = kernels::weight_ref{data, info->type, t.shape[0], t.shape[1]};
  }
  if (c.tie_word_embeddings || ck->no_lm_head) w.lm_head = w.embed_tokens;
  account_weight_bytes(*ck);

  // Anything else in the files would be silently ignored weights: a wrong config or export.
  std::unordered_set<std::string_view> wanted;
  for (const auto& t : expected) wanted.insert(t.name);
  auto unexpected = [&](const std::string& where, const std::string& name) {
    throw_error(errc::invalid_checkpoint,
                where + ": unexpected tensor '" + name + "'; expected only the tensors of a " +
                    model_class_name(c) + " with config.json's shape (" +
                    std::to_string(c.num_hidden_layers) + " layers" +
                    (c.num_labels > 0       ? ", a score head of " + std::to_string(c.num_labels) + " labels"
                     : c.tie_word_embeddings ? std::string(", tied embeddings")
                                             : std::string(", untied lm_head")) +
                    (c.arch == architecture::qwen3_moe
                         ? ", " + std::to_string(c.num_experts) + " experts"
                         : std::string()) +
                    ")");
  };
  for (const auto& [stored, file] : wf.placement)
    if (const auto name = wf.causal_lm_name(stored); !wanted.count(name) && !ignorable(name, c)) unexpected(wf.index_path, stored);
  for (const auto& f : wf.files)
    for (const auto& t : f.tensors())
      if (const auto name = wf.causal_lm_name(t.name); !wanted.count(name) && !ignorable(name, c)) unexpected(f.path(), t.name);

  for (auto& f : wf.files) ck->files.push_back(std::move(f).release_mapping());
  return ck;
}

void account_weight_bytes(checkpoint& ck) {
  const model_config& c = ck.config;
  model_weights& w = ck.weights;
  w.bytes = w.active_bytes = 0;
  w.num_parameters = 0;
  std::vector<size_t> expert_bytes(static_cast<size_t>(c.num_hidden_layers), 0);
  for (const auto& t : expected_tensors(c)) {
    if (const auto* norm = norm_slot(w, t)) {
      w.num_parameters += static_cast<int64_t>(norm->size());
      w.bytes += norm->size() * sizeof(float);
      w.active_bytes += norm->size() * sizeof(float);
      continue;
    }
    if (t.kind == tensor_kind::lm_head && ck.no_lm_head) continue;  // a stand-in, never read
    const kernels::weight_ref& r = *weight_slot(w, t);
    w.num_parameters += r.rows * r.cols;
    const size_t nb = r.bytes() + (r.scales ? r.scale_bytes() : 0) + kernels::zero_bytes(r);
    if (t.kind == tensor_kind::embed_tokens) {
      if (c.tie_word_embeddings) w.bytes += nb, w.active_bytes += nb;  // doubles as lm_head
    } else if (t.expert >= 0) {
      w.bytes += nb;
      expert_bytes[static_cast<size_t>(t.layer)] += nb;
    } else {
      w.bytes += nb;
      w.active_bytes += nb;
    }
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_is_moe(l))
      w.active_bytes += expert_bytes[static_cast<size_t>(l)] / static_cast<size_t>(c.num_experts) *
                        static_cast<size_t>(c.num_experts_per_tok);
}

}  // namespace troupe
