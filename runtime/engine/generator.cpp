#include "runtime/engine/generator.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include "runtime/core/error.hpp"
#include "runtime/engine/single_sequence_pool.hpp"

namespace troupe {

namespace {
constexpr int32_t kBlockSize = single_sequence_pool::block_size;

// Runs the prompt through `pool`'s runner in chunks of `chunk` tokens (0: one step): the last
// chunk asks for `last`, earlier ones for `earlier`; after(res) sees each step's result.
void prefill(single_sequence_pool& pool, const std::vector<int32_t>& prompt, int64_t chunk, logits_mode last,
             logits_mode earlier, int32_t adapter, step_result& res,
             const std::function<void(const step_result&)>& after = {}) {
  const int64_t p = static_cast<int64_t>(prompt.size());
  if (chunk <= 0) chunk = p;
  for (int64_t start = 0; start < p; start += chunk) {
    const int64_t n = std::min(chunk, p - start);
    const step_sequence sq{0, std::span<const int32_t>(prompt.data() + start, n), static_cast<int32_t>(start),
                           pool.table, start + n == p ? last : earlier, adapter};
    pool.step(std::span<const step_sequence>(&sq, 1), res);
    if (after) after(res);
  }
}

void check_prompt(const std::vector<int32_t>& prompt, const model_config& cfg, int64_t extra) {
  if (prompt.empty()) throw_error(errc::invalid_input, "the prompt has no tokens");
  const int64_t len = static_cast<int64_t>(prompt.size()) + extra;
  if (cfg.context_length() > 0 && len > cfg.context_length())
    throw_error(errc::out_of_range, "prompt (" + std::to_string(prompt.size()) + " tokens) plus max_tokens (" +
                                        std::to_string(extra) + ") exceeds the model's context of " +
                                        std::to_string(cfg.context_length()) + " tokens");
}
}  // namespace

generate_output generator::generate(const std::vector<int32_t>& prompt, const generate_options& opts,
                                    const std::function<void(int32_t)>& on_token) {
  if (ckpt_.config.num_labels > 0)
    throw_error(errc::unsupported, ckpt_.dir + " is a " + model_class_name(ckpt_.config) + " (a score head of " +
                                       std::to_string(ckpt_.config.num_labels) +
                                       " labels, no lm_head): it scores text (troupe classify, troupe rerank, troupe logits), "
                                       "it does not generate");
  if (opts.max_tokens <= 0)
    throw_error(errc::invalid_argument, "max_tokens must be positive (got " + std::to_string(opts.max_tokens) + ")");
  if (opts.prefill_chunk < 0) throw_error(errc::invalid_argument, "prefill_chunk must be >= 0");
  validate(opts.sampling);
  check_prompt(prompt, ckpt_.config, opts.max_tokens);

  single_sequence_pool pool(ckpt_, static_cast<int64_t>(prompt.size()) + opts.max_tokens, opts.kv_cache_dtype,
                            {opts.compute}, parallel_, engines_);
  const int32_t adapter = opts.adapter ? pool.add_adapter(opts.adapter) : -1;
  sampler smp(opts.sampling);
  step_result res;
  generate_output out;

  const int64_t p = static_cast<int64_t>(prompt.size());
  prefill(pool, prompt, opts.prefill_chunk, logits_mode::last, logits_mode::none, adapter, res);

  std::vector<float> row;
  std::vector<int32_t> context(opts.propose ? prompt : std::vector<int32_t>{});  // for the proposer
  std::vector<int32_t> fed;  // the last decode step's tokens: the token, then its drafts
  int64_t r = res.num_rows[0] - 1;  // the row to sample next
  for (int32_t i = 0; i < opts.max_tokens; ++i) {
    auto rr = res.row(0, r);
    row.assign(rr.begin(), rr.end());
    const int32_t id = smp.sample(row, prompt, out.ids);
    out.ids.push_back(id);
    if (on_token) on_token(id);
    const auto& stops = opts.sampling.stop_token_ids;
    if (!opts.sampling.ignore_eos && std::find(stops.begin(), stops.end(), id) != stops.end()) {
      out.finish_reason = "stop";
      return out;
    }
    if (i + 1 == opts.max_tokens) break;
    if (opts.propose) context.push_back(id);
    // Row r + 1 holds the logits after draft r: when the token just sampled is that draft, the
    // next token needs no step.
    if (r + 1 < static_cast<int64_t>(fed.size()) && fed[static_cast<size_t>(r + 1)] == id) {
      ++r;
      ++out.accepted_drafts;
      continue;
    }
    fed.assign(1, id);
    if (opts.propose) {
      auto drafts = opts.propose(context, opts.max_tokens - i - 2);  // each may add a token
      fed.insert(fed.end(), drafts.begin(), drafts.end());
    }
    step_sequence sq{0, fed, static_cast<int32_t>(p + i), pool.table,
                     fed.size() > 1 ? logits_mode::all : logits_mode::last, adapter};
    pool.step(std::span<const step_sequence>(&sq, 1), res);
    ++out.decode_steps;
    r = 0;
  }
  out.finish_reason = "length";
  return out;
}

std::vector<float> generator::prompt_logits(const std::vector<int32_t>& prompt, int32_t prefill_chunk,
                                            dtype kv_cache_dtype, model_runner_options runner,
                                            std::shared_ptr<const lora_adapter> adapter) {
  check_prompt(prompt, ckpt_.config, 0);
  single_sequence_pool pool(ckpt_, static_cast<int64_t>(prompt.size()), kv_cache_dtype, runner, parallel_, engines_);
  const int32_t slot = adapter ? pool.add_adapter(std::move(adapter)) : -1;
  step_result res;
  std::vector<float> all;
  all.reserve(prompt.size() * static_cast<size_t>(ckpt_.config.vocab_size));
  prefill(pool, prompt, prefill_chunk, logits_mode::all, logits_mode::all, slot, res,
          [&](const step_result& r) { all.insert(all.end(), r.logits.begin(), r.logits.end()); });
  return all;
}

std::vector<float> generator::last_logits(const std::vector<int32_t>& prompt, const generate_options& run) {
  check_prompt(prompt, ckpt_.config, 0);
  if (run.prefill_chunk < 0) throw_error(errc::invalid_argument, "prefill_chunk must be >= 0");
  single_sequence_pool pool(ckpt_, static_cast<int64_t>(prompt.size()), run.kv_cache_dtype, {run.compute}, parallel_, engines_);
  const int32_t slot = run.adapter ? pool.add_adapter(run.adapter) : -1;
  step_result res;
  prefill(pool, prompt, run.prefill_chunk, logits_mode::last, logits_mode::none, slot, res);
  const auto row = res.row(0, res.num_rows[0] - 1);
  return {row.begin(), row.end()};
}

std::vector<float> generator::embed(const std::vector<int32_t>& prompt, const embedding_options& opts,
                                    const generate_options& run) {
  return embed_batch({prompt}, opts, run).front();
}

std::vector<std::vector<float>> generator::embed_batch(const std::vector<std::vector<int32_t>>& prompts,
                                                       const embedding_options& opts, const generate_options& run) {
  // Everything checked before any step: a bad input costs no forward pass.
  if (prompts.empty()) throw_error(errc::invalid_argument, "no prompts to embed");
  for (size_t i = 0; i < prompts.size(); ++i) try {
      check_prompt(prompts[i], ckpt_.config, 0);
    } catch (const error& e) {
      throw_error(e.code(), "input " + std::to_string(i) + ": " + e.what());
    }
  check_embedding_options(opts, ckpt_.config.hidden_size);
  if (run.prefill_chunk < 0) throw_error(errc::invalid_argument, "prefill_chunk must be >= 0");
  const int64_t budget = run.prefill_chunk > 0 ? run.prefill_chunk : kEmbedStepTokens;
  auto blocks = [](size_t tokens) { return static_cast<int64_t>((tokens + kBlockSize - 1) / kBlockSize); };
  // Groups of consecutive prompts sharing a step: [begin, end), at most `budget` tokens, or one.
  std::vector<std::pair<size_t, size_t>> groups;
  int64_t pool_blocks = 0;
  for (size_t b = 0; b < prompts.size();) {
    size_t e = b + 1;
    int64_t tokens = static_cast<int64_t>(prompts[b].size()), need = blocks(prompts[b].size());
    while (e < prompts.size() && tokens + static_cast<int64_t>(prompts[e].size()) <= budget) {
      tokens += static_cast<int64_t>(prompts[e].size());
      need += blocks(prompts[e++].size());
    }
    groups.emplace_back(b, e);
    pool_blocks = std::max(pool_blocks, need);
    b = e;
  }
  single_sequence_pool pool(ckpt_, pool_blocks * kBlockSize, run.kv_cache_dtype, {run.compute}, parallel_, engines_);
  const int32_t slot = run.adapter ? pool.add_adapter(run.adapter) : -1;
  std::vector<std::vector<float>> out;
  out.reserve(prompts.size());
  step_result res;
  std::vector<step_sequence> batch;
  for (const auto& [b, e] : groups) {
    if (e == b + 1) {  // alone: in chunks of the budget
      prefill(pool, prompts[b], budget, logits_mode::hidden, logits_mode::none, slot, res);
      out.push_back(finish_embedding(res.hidden_of(0), opts));
      continue;
    }
    batch.clear();
    int64_t first_block = 0;
    for (size_t i = b; i < e; ++i) {
      const auto n = static_cast<size_t>(blocks(prompts[i].size()));
      batch.push_back({static_cast<int64_t>(i), prompts[i], 0,
                       std::span<const int32_t>(pool.table).subspan(static_cast<size_t>(first_block), n),
                       logits_mode::hidden, slot});
      first_block += static_cast<int64_t>(n);
    }
    pool.step(batch, res);
    for (size_t k = 0; k < batch.size(); ++k) out.push_back(finish_embedding(res.hidden_of(k), opts));
  }
  return out;
}

}  // namespace troupe
