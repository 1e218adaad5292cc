// The Qwen3 forward step. Every operation is per token (norms, RoPE, matmul rows, expert
// choice) or per sequence (attention through its block table), which is what makes a
// sequence's logits independent of its batch and of how its prompt was chunked.
#include "runtime/engine/model_runner.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/fp8_activations.hpp"
#include "runtime/core/error.hpp"
#include "runtime/engine/tp_group.hpp"

namespace troupe {

namespace {
template <class T, class A>
void ensure(std::vector<T, A>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// x += y element-wise (the residual adds); split over the threads for prompt-sized steps.
void add_inplace(float* x, const float* y, int64_t total) {
#pragma omp parallel for schedule(static) if (total >= (int64_t{1} << 16))
  for (int64_t i = 0; i < total; ++i) x[i] += y[i];
}
}  // namespace

kernels::compute_dtype parse_compute_dtype(std::string_view text, std::string_view option) {
  if (text == "f32") return kernels::compute_dtype::f32;
  if (text == "bf16") return kernels::compute_dtype::bf16;
  throw_error(errc::invalid_argument,
              std::string(option) + ": '" + std::string(text) + "' is not one of f32, bf16");
}

const char* to_string(kernels::compute_dtype c) noexcept { return c == kernels::compute_dtype::bf16 ? "bf16" : "f32"; }

model_runner::model_runner(const checkpoint& ckpt, kv_cache& kv, model_runner_options opts)
    : ckpt_(ckpt),
      cfg_(ckpt.config),
      kv_(kv),
      opts_(opts),
      scratch_(opts.scratch ? opts.scratch : std::make_shared<model_runner_scratch>()) {
  opts_.scratch = nullptr;  // the runner holds it in scratch_
  first_layer_ = opts.first_layer;
  end_layer_ = opts.end_layer < 0 ? cfg_.num_hidden_layers : opts.end_layer;
  if (first_layer_ < 0 || first_layer_ >= end_layer_ || end_layer_ > cfg_.num_hidden_layers)
    throw_error(errc::invalid_argument, "model_runner: layers [" + std::to_string(first_layer_) + ", " +
                                            std::to_string(end_layer_) + ") are not a range of the model's " +
                                            std::to_string(cfg_.num_hidden_layers));
  if (kv.num_layers() != end_layer_ - first_layer_ || kv.layer(0).n_kv_heads != cfg_.num_key_value_heads ||
      kv.layer(0).head_dim != cfg_.head_dim)
    throw_error(errc::invalid_argument, "model_runner: KV pool shape does not match the model config");
  rope_ = rope_frequencies_of(cfg_);
}

void model_runner::matmul(const float* x, int64_t n, const kernels::weight_ref& w, float* y) { matmul(x, n, {{w, y}}); }

// fp8_activations: x rounded to FP8 once for the FP8 products (every one of them, or each alone).
void model_runner::matmul(const float* x, int64_t n, std::initializer_list<kernels::matmul_out> outs) {
  const auto is_fp8 = [](const kernels::matmul_out& o) { return o.w.type == dtype::f8_e4m3; };
  if (opts_.fp8_activations && std::any_of(outs.begin(), outs.end(), is_fp8)) {
    if (!std::all_of(outs.begin(), outs.end(), is_fp8)) {  // x is rounded for the FP8 products only
      for (const auto& o : outs) matmul(x, n, o.w, o.y);
      return;
    }
    ensure(fp8_x_, static_cast<size_t>(n * outs.begin()->w.cols));
    kernels::round_fp8_act_rows(x, n, outs.begin()->w.cols, fp8_x_.data());
    x = fp8_x_.data();
  }
  kernels::matmul(x, n, std::span<const kernels::matmul_out>(outs.begin(), outs.size()), opts_.compute);
}

void model_runner::all_reduce(float* buf, int64_t count) {
  if (opts_.tp) opts_.tp->all_reduce_sum(opts_.tp_rank, buf, count);
}

void model_runner::validate(std::span<const step_sequence> batch) const {
  validate_step(batch, cfg_, kv_.num_blocks(), kv_.block_size(), num_adapters());
  for (const auto& sq : batch)
    if (sq.adapter >= 0 && !adapters_[static_cast<size_t>(sq.adapter)])
      throw_error(errc::out_of_range, "step: sequence " + std::to_string(sq.seq_id) + " asks for LoRA adapter slot " +
                                          std::to_string(sq.adapter) + ", which is empty (its adapter was unloaded)");
  if (ckpt_.no_lm_head)
    for (const auto& sq : batch)
      if (sq.logits == logits_mode::last || sq.logits == logits_mode::all)
        throw_error(errc::unsupported, "sequence " + std::to_string(sq.seq_id) + ": " + ckpt_.dir +
                                           " has no lm_head.weight (a Qwen3Model export with untied embeddings, "
                                           "such as Qwen3-Embedding-8B): it gives embeddings (troupe embed), not logits");
}

int32_t model_runner::add_adapter(std::shared_ptr<const lora_adapter> adapter) {
  if (!adapter)
    throw_error(errc::invalid_argument, "model_runner: LoRA adapter '' was not loaded for this model's " +
                                            std::to_string(cfg_.num_hidden_layers) + " layers");
  const auto slot = static_cast<int32_t>(adapters_.size());
  set_adapter(slot, std::move(adapter));
  return slot;
}

void model_runner::set_adapter(int32_t slot, std::shared_ptr<const lora_adapter> adapter) {
  if (slot < 0) throw_error(errc::invalid_argument, "model_runner: LoRA adapter slot " + std::to_string(slot));
  if (adapter && static_cast<int64_t>(adapter->layers.size()) != cfg_.num_hidden_layers)
    throw_error(errc::invalid_argument, "model_runner: LoRA adapter '" + adapter->name +
                                            "' was not loaded for this model's " +
                                            std::to_string(cfg_.num_hidden_layers) + " layers");
  if (static_cast<size_t>(slot) >= adapters_.size()) adapters_.resize(static_cast<size_t>(slot) + 1);
  adapters_[static_cast<size_t>(slot)] = std::move(adapter);
}

// Rows of one adapter are gathered and run as one batch per matrix: matmul gives each row the same
// bits whatever its neighbours, so a sequence's result does not depend on who shares its adapter.
void model_runner::apply_lora(int64_t layer, lora_target t, const float* x, float* y) {
  for (int32_t slot : step_adapters_) {
    const lora_pair* p = adapters_[static_cast<size_t>(slot)]->pair(layer, t);
    if (!p) continue;
    lora_rows_.clear();
    for (int64_t r = 0; r < n_; ++r)
      if (row_adapter_[r] == slot) lora_rows_.push_back(r);
    const int64_t m = static_cast<int64_t>(lora_rows_.size());
    if (m == 0) continue;
    ensure(lora_x_, m * p->in);
    ensure(lora_t_, m * p->rank);
    ensure(lora_u_, m * p->out);
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + lora_rows_[i] * p->in, p->in, lora_x_.data() + i * p->in);
    kernels::matmul(lora_x_.data(), m, p->a_ref(), lora_t_.data());
    kernels::matmul(lora_t_.data(), m, p->b_ref(), lora_u_.data());
    // PEFT's order: result + lora_B(lora_A(x)) * scaling.
    for (int64_t i = 0; i < m; ++i) {
      float* yr = y + lora_rows_[i] * p->out;
      const float* ur = lora_u_.data() + i * p->out;
      for (int64_t j = 0; j < p->out; ++j) yr[j] += ur[j] * p->scaling;
    }
  }
}

void model_runner::step(std::span<const step_sequence> batch, step_result& out) { step(batch, out, nullptr, nullptr); }

void model_runner::step(std::span<const step_sequence> batch, step_result& out, const float* residual_in,
                        aligned_vector<float>* residual_out) {
  if ((residual_in != nullptr) != (first_layer_ > 0) || (residual_out != nullptr) != (end_layer_ < cfg_.num_hidden_layers))
    throw_error(errc::invalid_argument, "model_runner: a stage of layers [" + std::to_string(first_layer_) + ", " +
                                            std::to_string(end_layer_) + ") " +
                                            (first_layer_ > 0 ? "needs" : "takes no") + " residual rows in and " +
                                            (end_layer_ < cfg_.num_hidden_layers ? "needs" : "takes no") +
                                            " residual rows out");
  validate(batch);
  const auto& w = ckpt_.weights;
  const int64_t hidden = cfg_.hidden_size;

  n_ = 0;
  for (const auto& sq : batch) n_ += static_cast<int64_t>(sq.tokens.size());
  ensure(ids_, n_);
  ensure(positions_, n_);
  ensure(row_adapter_, n_);
  step_adapters_.clear();
  int64_t row = 0;
  for (const auto& sq : batch) {
    if (sq.adapter >= 0 && std::find(step_adapters_.begin(), step_adapters_.end(), sq.adapter) == step_adapters_.end())
      step_adapters_.push_back(sq.adapter);
    for (size_t t = 0; t < sq.tokens.size(); ++t, ++row) {
      ids_[row] = sq.tokens[t];
      positions_[row] = sq.start_pos + static_cast<int32_t>(t);
      row_adapter_[row] = sq.adapter;
    }
  }

  ensure(x_, n_ * hidden);
  ensure(h_, n_ * hidden);
  if (residual_in)
    std::copy_n(residual_in, n_ * hidden, x_.data());
  else
    kernels::embedding(w.embed_tokens, ids_.data(), n_, x_.data());

  if (residual_out) {  // a stage before the last: every row goes on to the next stage's K and V
    for (int64_t l = first_layer_; l < end_layer_; ++l) layer(l, batch, nullptr);
    residual_out->resize(static_cast<size_t>(n_ * hidden));
    std::copy_n(x_.data(), n_ * hidden, residual_out->data());
    return;
  }

  // Rows whose logits were asked for: mid-prompt chunks ask for none, prompts for their last.
  out.first_row.assign(batch.size(), 0);
  out.num_rows.assign(batch.size(), 0);
  out.hidden_row.assign(batch.size(), -1);
  std::vector<int64_t> rows;
  std::vector<bool> row_is_hidden;  // per entry of rows: a logits_mode::hidden sequence's last token
  int64_t n_hidden = 0;
  row = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const int64_t n = static_cast<int64_t>(batch[s].tokens.size());
    out.first_row[s] = static_cast<int64_t>(rows.size()) - n_hidden;
    if (batch[s].logits == logits_mode::last || batch[s].logits == logits_mode::hidden) {
      rows.push_back(row + n - 1);
      row_is_hidden.push_back(batch[s].logits == logits_mode::hidden);
      if (row_is_hidden.back()) out.hidden_row[s] = n_hidden++;
    } else if (batch[s].logits == logits_mode::all) {
      for (int64_t t = 0; t < n; ++t) rows.push_back(row + t);
      row_is_hidden.resize(rows.size(), false);
    }
    out.num_rows[s] = static_cast<int64_t>(rows.size()) - n_hidden - out.first_row[s];
    row += n;
  }
  const int64_t n_out = static_cast<int64_t>(rows.size());
  // After the last layer's K and V, only those rows matter: its queries, attention output and MLP
  // run on them alone (rows are independent, so their values do not change).
  const bool prune = n_out < n_;

  for (int64_t l = first_layer_; l < end_layer_; ++l) layer(l, batch, l + 1 == end_layer_ && prune ? &rows : nullptr);

  // Logits only for the rows asked for (pruned: they are rows 0 .. n_out - 1 of x_ now). A
  // tensor-parallel rank's lm_head is its range of the vocabulary.
  out.vocab_size = w.lm_head.rows;
  out.hidden_size = hidden;
  out.hidden.resize(static_cast<size_t>(n_hidden * hidden));
  const int64_t n_logits = n_out - n_hidden;
  out.logits.resize(static_cast<size_t>(n_logits * out.vocab_size));
  if (n_out == 0) return;
  ensure(final_, n_out * hidden);
  for (int64_t r = 0; r < n_out; ++r)
    std::copy_n(x_.data() + (prune ? r : rows[r]) * hidden, hidden, final_.data() + r * hidden);
  kernels::rmsnorm(final_.data(), w.norm.data(), n_out, hidden, static_cast<float>(cfg_.rms_norm_eps), final_.data());
  if (n_hidden > 0) {
    // The hidden rows out, the logits rows packed in front of final_ for lm_head (each row is
    // normed alone, so neither kind depends on the other).
    int64_t h = 0, l = 0;
    for (int64_t r = 0; r < n_out; ++r) {
      const float* src = final_.data() + r * hidden;
      if (row_is_hidden[static_cast<size_t>(r)])
        std::copy_n(src, hidden, out.hidden.data() + h++ * hidden);
      else if (l++ != r)
        std::copy_n(src, hidden, final_.data() + (l - 1) * hidden);
    }
  }
  if (n_logits > 0) matmul(final_.data(), n_logits, w.lm_head, out.logits.data());
}

void model_runner::layer(int64_t l, std::span<const step_sequence> batch, const std::vector<int64_t>* keep) {
  const auto& lw = ckpt_.weights.layers[static_cast<size_t>(l)];
  const int64_t hidden = cfg_.hidden_size;
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  kernels::rmsnorm(x_.data(), lw.input_layernorm.data(), n_, hidden, eps, h_.data());
  attention_block(l, batch, keep);
  kernels::rmsnorm(x_.data(), lw.post_attention_layernorm.data(), n_, hidden, eps, h_.data());
  if (cfg_.layer_is_moe(l))
    moe_mlp(lw);
  else
    dense_mlp(l, lw);
}

void model_runner::attention_block(int64_t l, std::span<const step_sequence> batch, const std::vector<int64_t>* keep) {
  const auto& lw = ckpt_.weights.layers[l];
  const int64_t hq = cfg_.num_attention_heads, hk = cfg_.num_key_value_heads, d = cfg_.head_dim;
  const int64_t hidden = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  ensure(q_, n_ * hq * d);
  ensure(k_, n_ * hk * d);
  ensure(v_, n_ * hk * d);
  ensure(attn_, n_ * hq * d);
  ensure(tmp_, n_ * hidden);
  // K and V of every token go to the pool; so do the queries unless this layer keeps only some rows.
  if (keep)
    matmul(h_.data(), n_, {{lw.k_proj, k_.data()}, {lw.v_proj, v_.data()}});
  else
    matmul(h_.data(), n_, {{lw.q_proj, q_.data()}, {lw.k_proj, k_.data()}, {lw.v_proj, v_.data()}});
  apply_lora(l, lora_target::k_proj, h_.data(), k_.data());
  apply_lora(l, lora_target::v_proj, h_.data(), v_.data());
  // Qwen3: per-head RMSNorm of q and k over head_dim, before RoPE.
  kernels::rmsnorm(k_.data(), lw.k_norm.data(), n_ * hk, d, eps, k_.data());
  kernels::rope(k_.data(), n_, hk, d, positions_.data(), rope_.inv_freq.data(), rope_.attention_factor);
  const auto& kv = kv_.layer(l - first_layer_);
  int64_t row = 0;
  seq_rows_.resize(batch.size());
  for (size_t s = 0; s < batch.size(); ++s) {
    const auto& sq = batch[s];
    const int64_t n = static_cast<int64_t>(sq.tokens.size());
    kernels::kv_write(kv, sq.block_table.data(), sq.start_pos, n, k_.data() + row * hk * d, v_.data() + row * hk * d);
    seq_rows_[s] = row;
    row += n;
  }
  // Queries: every token, or (last layer) only the rows whose logits were asked for: a suffix of
  // each sequence's rows (its last token or all of them), moved to the front in order.
  seq_queries_.resize(batch.size());
  if (keep) {
    for (size_t r = 0; r < keep->size(); ++r) {
      const int64_t from = (*keep)[r];
      if (from == static_cast<int64_t>(r)) continue;
      std::copy_n(x_.data() + from * hidden, hidden, x_.data() + r * hidden);
      std::copy_n(h_.data() + from * hidden, hidden, h_.data() + r * hidden);
      positions_[r] = positions_[from];
      row_adapter_[r] = row_adapter_[from];
    }
    int64_t k = 0;
    for (size_t s = 0; s < batch.size(); ++s) {
      const int64_t end = seq_rows_[s] + static_cast<int64_t>(batch[s].tokens.size());
      const int64_t first = k;
      while (k < static_cast<int64_t>(keep->size()) && (*keep)[k] < end) ++k;
      seq_rows_[s] = first;
      seq_queries_[s] = k - first;
    }
    n_ = static_cast<int64_t>(keep->size());
  } else {
    for (size_t s = 0; s < batch.size(); ++s) seq_queries_[s] = static_cast<int64_t>(batch[s].tokens.size());
  }
  if (n_ == 0) return;
  if (keep) matmul(h_.data(), n_, lw.q_proj, q_.data());
  apply_lora(l, lora_target::q_proj, h_.data(), q_.data());
  kernels::rmsnorm(q_.data(), lw.q_norm.data(), n_ * hq, d, eps, q_.data());
  kernels::rope(q_.data(), n_, hq, d, positions_.data(), rope_.inv_freq.data(), rope_.attention_factor);

  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  bool short_chunks = batch.size() > 1;
  for (size_t s = 0; s < batch.size(); ++s) short_chunks = short_chunks && seq_queries_[s] <= 4;
  auto attend = [&](size_t s) {
    const auto& sq = batch[s];
    const int64_t r = seq_rows_[s], nq = seq_queries_[s];
    if (nq == 0) return;
    const int32_t start = sq.start_pos + static_cast<int32_t>(static_cast<int64_t>(sq.tokens.size()) - nq);
    kernels::paged_attention(q_.data() + r * hq * d, nq, hq, start, kv, sq.block_table.data(), scale,
                             attn_.data() + r * hq * d);
  };
  // A batch of decode tokens: one parallel region over the sequences (each sequence's attention then
  // runs on one thread) instead of one small region per sequence. A prompt chunk keeps the threads
  // inside its own attention. Either way every (token, head) gets the same arithmetic.
  if (short_chunks) {
    const int64_t count = static_cast<int64_t>(batch.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t s = 0; s < count; ++s) attend(static_cast<size_t>(s));
  } else {
    for (size_t s = 0; s < batch.size(); ++s) attend(s);
  }
  matmul(attn_.data(), n_, lw.o_proj, tmp_.data());
  apply_lora(l, lora_target::o_proj, attn_.data(), tmp_.data());
  all_reduce(tmp_.data(), n_ * hidden);
  add_inplace(x_.data(), tmp_.data(), n_ * hidden);
}

void model_runner::dense_mlp(int64_t layer, const layer_weights& lw) {
  const int64_t inter = lw.gate_proj.rows;
  ensure(gate_, n_ * inter);
  ensure(up_, n_ * inter);
  matmul(h_.data(), n_, {{lw.gate_proj, gate_.data()}, {lw.up_proj, up_.data()}});
  apply_lora(layer, lora_target::gate_proj, h_.data(), gate_.data());
  apply_lora(layer, lora_target::up_proj, h_.data(), up_.data());
  kernels::silu_mul(gate_.data(), up_.data(), n_ * inter, gate_.data());
  matmul(gate_.data(), n_, lw.down_proj, tmp_.data());
  apply_lora(layer, lora_target::down_proj, gate_.data(), tmp_.data());
  all_reduce(tmp_.data(), n_ * cfg_.hidden_size);
  add_inplace(x_.data(), tmp_.data(), n_ * cfg_.hidden_size);
}

void model_runner::moe_mlp(const layer_weights& lw) {
  const int64_t hidden = cfg_.hidden_size, n_exp = cfg_.num_experts, top_k = cfg_.num_experts_per_tok;
  ensure(router_, n_ * n_exp);
  matmul(h_.data(), n_, lw.router, router_.data());

  // Per token: softmax over all experts, top-k (ties -> lower expert id), optional renormalise.
  std::vector<int32_t> chosen(n_ * top_k);
  std::vector<float> weight(n_ * top_k);
  std::vector<int32_t> order(n_exp);
  for (int64_t t = 0; t < n_; ++t) {
    float* p = router_.data() + t * n_exp;
    float mx = *std::max_element(p, p + n_exp);
    float sum = 0.0f;
    for (int64_t e = 0; e < n_exp; ++e) sum += (p[e] = std::exp(p[e] - mx));
    for (int64_t e = 0; e < n_exp; ++e) p[e] /= sum;
    for (int64_t e = 0; e < n_exp; ++e) order[e] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [p](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float picked = 0.0f;
    for (int64_t r = 0; r < top_k; ++r) picked += p[order[r]];
    for (int64_t r = 0; r < top_k; ++r) {
      chosen[t * top_k + r] = order[r];
      weight[t * top_k + r] = cfg_.norm_topk_prob ? p[order[r]] / picked : p[order[r]];
    }
  }

  // Each expert runs on the rows routed to it; outputs land in a per-(token, rank) slot so the
  // weighted sum below is in rank order whatever the batch. An expert-parallel rank holds some
  // experts only (shard.hpp: the others are empty) and sums its own slots; the all-reduce adds the
  // ranks' sums.
  ensure(moe_out_, n_ * top_k * hidden);
  std::vector<int64_t> slots;
  auto held = [&](int64_t e) { return lw.experts[static_cast<size_t>(e)].gate_proj.data != nullptr; };
  for (int64_t e = 0; e < n_exp; ++e) {
    if (!held(e)) continue;
    slots.clear();
    for (int64_t i = 0; i < n_ * top_k; ++i)
      if (chosen[i] == e) slots.push_back(i);
    if (slots.empty()) continue;
    const int64_t m = static_cast<int64_t>(slots.size());
    const auto& ew = lw.experts[e];
    const int64_t inter = ew.gate_proj.rows;
    ensure(expert_in_, m * hidden);
    ensure(expert_gate_, m * inter);
    ensure(expert_up_, m * inter);
    ensure(expert_out_, m * hidden);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(h_.data() + (slots[i] / top_k) * hidden, hidden, expert_in_.data() + i * hidden);
    matmul(expert_in_.data(), m, {{ew.gate_proj, expert_gate_.data()}, {ew.up_proj, expert_up_.data()}});
    kernels::silu_mul(expert_gate_.data(), expert_up_.data(), m * inter, expert_gate_.data());
    matmul(expert_gate_.data(), m, ew.down_proj, expert_out_.data());
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(expert_out_.data() + i * hidden, hidden, moe_out_.data() + slots[i] * hidden);
  }
  // Alone, the weighted outputs go straight onto the residual; a tensor-parallel rank's are partial
  // sums (its slice of every expert's width, or its experts' outputs), summed across the ranks
  // before they do.
  float* acc = x_.data();
  if (opts_.tp) {
    ensure(tmp_, n_ * hidden);
    acc = tmp_.data();
    std::fill(acc, acc + n_ * hidden, 0.0f);
  }
  for (int64_t t = 0; t < n_; ++t)
    for (int64_t r = 0; r < top_k; ++r) {
      if (!held(chosen[t * top_k + r])) continue;
      const float wgt = weight[t * top_k + r];
      const float* src = moe_out_.data() + (t * top_k + r) * hidden;
      float* dst = acc + t * hidden;
      for (int64_t i = 0; i < hidden; ++i) dst[i] += wgt * src[i];
    }
  if (opts_.tp) {
    all_reduce(tmp_.data(), n_ * hidden);
    add_inplace(x_.data(), tmp_.data(), n_ * hidden);
  }
}

}  // namespace troupe
