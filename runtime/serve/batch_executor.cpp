#include "runtime/serve/batch_executor.hpp"

#include <chrono>
#include <utility>

#include "runtime/core/error.hpp"

namespace troupe::serve {

batch_executor::batch_executor(std::shared_ptr<const checkpoint> ckpt, int32_t num_blocks, int32_t block_size,
                               dtype kv_type, model_runner_options runner_options,
                               const std::vector<std::shared_ptr<const lora_adapter>>& adapters, parallel_config parallel)
    : backend_(make_cpu_backend(std::move(ckpt), num_blocks, block_size, kv_type, runner_options, adapters, parallel)) {}

batch_executor::batch_executor(std::unique_ptr<step_backend> backend) : backend_(std::move(backend)) {
  TROUPE_ASSERT(backend_ != nullptr);
}

std::shared_ptr<seq_sampling> rebuild_sampling(const seq_sampling& old, std::span<const int32_t> known_output) {
  auto p = old.smp.params();
  p.seed = old.smp.seed();  // the seed drawn at random, if the request gave none
  p.has_seed = true;
  auto fresh = std::make_shared<seq_sampling>(p, old.prompt);
  fresh->logprobs = old.logprobs;
  fresh->prompt_logprobs = old.prompt_logprobs;
  fresh->prompt_logprobs_next = old.prompt_logprobs_next;
  fresh->embed = old.embed;
  fresh->rerank = old.rerank;
  fresh->classify = old.classify;
  for (int32_t id : known_output) {
    fresh->smp.replay(id);  // one draw, and the grammar (if any) fed the token
    fresh->output.push_back(id);
  }
  return fresh;
}

step_outcome batch_executor::run(step_job& job) {
  step_outcome out;
  auto t0 = std::chrono::steady_clock::now();
  try {
    // Prefix caching: fetched K/V go into their fresh blocks before the forward pass reads them.
    for (const auto& l : job.plan.kv_loads) backend_->load_block(l.block, l.payload.bytes);
    backend_->step(job.plan.batch, result_);
    for (const auto& sv : job.plan.kv_saves) {
      out.saved.push_back({sv.meta, {}});
      backend_->save_block(sv.block, out.saved.back().payload);
    }
  } catch (const std::exception& e) {
    out.step_error = e.what();
    out.saved.clear();
    return out;
  }
  TROUPE_ASSERT(job.samplers.size() == static_cast<size_t>(job.plan.num_sampled));
  size_t q = 0;
  for (size_t i = 0; i < job.plan.seqs.size(); ++i) {
    const auto& sq = job.plan.batch[i];
    if (sq.logits != logits_mode::all || job.plan.seqs[i].num_draft > 0) continue;
    TROUPE_ASSERT(q < job.prompt_scorers.size());
    auto& s = *job.prompt_scorers[q++];
    std::vector<token_logprobs> scored;
    try {
      // Row r predicts position start_pos + r + 1.
      for (int64_t r = 0; r < result_.num_rows[i]; ++r) {
        const size_t next = static_cast<size_t>(sq.start_pos + r + 1);
        if (next < s.prompt_logprobs_next || next >= s.prompt.size()) continue;
        scored.push_back(logprobs_of(result_.row(i, r), s.prompt[next], s.prompt_logprobs));
        s.prompt_logprobs_next = next + 1;
      }
    } catch (const std::exception& e) {
      out.seq_errors.emplace_back(job.plan.seqs[i].seq_id, std::string("prompt logprobs: ") + e.what());
    }
    if (!scored.empty()) out.prompt_logprobs.emplace_back(job.plan.seqs[i].seq_id, std::move(scored));
  }
  TROUPE_ASSERT(q == job.prompt_scorers.size());
  out.sampled.reserve(job.samplers.size());
  out.counts.reserve(job.samplers.size());
  std::vector<float> raw;
  size_t k = 0;
  for (size_t i = 0; i < job.plan.seqs.size(); ++i) {
    const auto& e = job.plan.seqs[i];
    if (!e.sample) continue;
    auto& s = *job.samplers[k++];
    // An embedding request: no row to sample, its prompt's last hidden state to finish; a rerank
    // document: its score from the prompt's last logits row; a classify input: that row's label
    // probabilities.
    if (job.plan.batch[i].logits == logits_mode::hidden || s.rerank || s.classify) {
      try {
        if (s.rerank) {
          const float score = static_cast<float>(rerank_score(result_.row(i, result_.num_rows[i] - 1), *s.rerank));
          out.embeddings.emplace_back(e.seq_id, std::vector<float>{score});
        } else if (s.classify) {
          out.embeddings.emplace_back(e.seq_id, label_probs(result_.row(i, result_.num_rows[i] - 1)));
        } else {
          TROUPE_ASSERT(s.embed.has_value());
          out.embeddings.emplace_back(e.seq_id, finish_embedding(result_.hidden_of(i), *s.embed));
        }
        out.sampled.push_back(0);
      } catch (const std::exception& ex) {
        out.sampled.push_back(-1);
        out.seq_errors.emplace_back(e.seq_id, ex.what());
      }
      out.counts.push_back(1);
      continue;
    }
    // Without drafts the last row (all rows when scoring the prompt); with drafts row j follows
    // the last token and drafts 0..j-1, so it is only sampled while every draft before it held.
    const int64_t first = e.num_draft > 0 ? 0 : result_.num_rows[i] - 1;
    const auto drafts = job.plan.batch[i].tokens.subspan(1);
    const size_t before = out.sampled.size();
    try {
      for (int64_t r = first; r < result_.num_rows[i]; ++r) {
        auto row = result_.row(i, r);
        // Logprobs come from the model's distribution: keep the row as it was before sampling.
        if (s.logprobs >= 0) raw.assign(row.begin(), row.end());
        // The row lives in result_ and is rebuilt next step: sampling may modify it in place.
        int32_t id = s.smp.sample(std::span<float>(const_cast<float*>(row.data()), row.size()), s.prompt, s.output);
        if (s.logprobs >= 0) out.logprobs.emplace_back(e.seq_id, logprobs_of(raw, id, s.logprobs));
        s.output.push_back(id);
        out.sampled.push_back(id);
        if (e.num_draft == 0 || static_cast<size_t>(r) >= drafts.size() || id != drafts[static_cast<size_t>(r)]) break;
      }
      out.counts.push_back(static_cast<int32_t>(out.sampled.size() - before));
    } catch (const std::exception& ex) {
      // The sequence ends with an error: what it sampled before the failure goes nowhere.
      out.sampled.resize(before);
      out.sampled.push_back(-1);
      out.counts.push_back(1);
      out.seq_errors.emplace_back(e.seq_id, ex.what());
    }
  }
  if (draft_) {
    try {
      out.proposals = draft_->propose(job.plan, out.sampled, out.counts);
    } catch (const std::exception& e) {
      out.proposals.clear();
      out.draft_error = e.what();
    }
  }
  out.engine_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace troupe::serve
