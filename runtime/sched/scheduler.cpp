#include "runtime/sched/scheduler.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe::sched {

std::string_view to_string(finish_reason r) noexcept {
  switch (r) {
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::cancelled: return "cancelled";
    case finish_reason::deadline: return "deadline";
    case finish_reason::error: return "error";
  }
  return "?";
}

scheduler::scheduler(const sched_config& cfg, int32_t num_blocks, int32_t block_size,
                     std::unique_ptr<policy> pol)
    : cfg_(cfg), alloc_(num_blocks, block_size), policy_(pol ? std::move(pol) : std::make_unique<fcfs_policy>()) {
  auto bad = [](const std::string& m) { throw_error(errc::invalid_argument, m); };
  if (cfg.max_num_seqs < 1) bad("max_num_seqs must be >= 1; got " + std::to_string(cfg.max_num_seqs));
  if (cfg.max_num_batched_tokens < 1)
    bad("max_num_batched_tokens must be >= 1; got " + std::to_string(cfg.max_num_batched_tokens));
  if (cfg.max_model_len < 2) bad("max_model_len must be >= 2; got " + std::to_string(cfg.max_model_len));
  if (cfg.long_prefill_token_threshold < 0)
    bad("long_prefill_token_threshold must be >= 0; got " + std::to_string(cfg.long_prefill_token_threshold));
  if (cfg.max_prefill_tokens_while_decoding < 0)
    bad("max_prefill_tokens_while_decoding must be >= 0; got " + std::to_string(cfg.max_prefill_tokens_while_decoding));
  if (cfg.max_loras < 0) bad("max_loras must be >= 0; got " + std::to_string(cfg.max_loras));
  if (cfg.max_waiting < 1) bad("max_waiting must be >= 1; got " + std::to_string(cfg.max_waiting));
  int64_t pool_tokens = int64_t{num_blocks} * block_size;
  if (pool_tokens < cfg.max_model_len)
    bad("the KV pool holds " + std::to_string(pool_tokens) + " tokens (" + std::to_string(num_blocks) +
        " blocks of " + std::to_string(block_size) + "), less than one max_model_len sequence (" +
        std::to_string(cfg.max_model_len) + "): lower max_model_len or raise the KV-cache budget");
  if (!cfg.enable_chunked_prefill && cfg.max_num_batched_tokens < cfg.max_model_len)
    bad("without chunked prefill, max_num_batched_tokens (" + std::to_string(cfg.max_num_batched_tokens) +
        ") must be >= max_model_len (" + std::to_string(cfg.max_model_len) + ") or long prompts never run");
  if (cfg.enable_prefix_caching) {
    prefix::cache_identity id = cfg.prefix_identity;
    id.block_size = block_size;
    prefix_ = std::make_unique<prefix::prefix_cache>(id, num_blocks, cfg.prefix_options);
  }
}

seq_view scheduler::view(const sequence& s) const {
  seq_view v;
  v.seq_id = s.spec.seq_id;
  v.arrival = s.arrival;
  v.priority = s.spec.priority;
  v.tenant = s.spec.tenant;
  v.num_prompt_tokens = s.num_prompt;
  v.num_output_tokens = static_cast<int32_t>(s.tokens.size()) - s.num_prompt;
  v.arrival_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.arrival_time.time_since_epoch()).count();
  if (s.spec.deadline)
    v.deadline_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.spec.deadline->time_since_epoch()).count();
  v.max_output_tokens = s.max_total - s.num_prompt;
  v.num_computed_tokens = s.num_computed;
  if (prefix_) v.num_cached_tokens = prefix_->cached_prefix_tokens(v.seq_id, s.tokens.size());
  return v;
}

bool scheduler::before(int64_t a, int64_t b) const {
  return policy_->before(view(seqs_.at(a)), view(seqs_.at(b)));
}

void scheduler::insert_sorted(std::vector<int64_t>& q, int64_t id) {
  // After every element that is not served after `id`: equal keys keep arrival order.
  auto it = std::upper_bound(q.begin(), q.end(), id, [&](int64_t x, int64_t y) { return before(x, y); });
  q.insert(it, id);
}

admission scheduler::add(request_spec spec) {
  if (seqs_.count(spec.seq_id))
    return {admit_status::invalid, "sequence id " + std::to_string(spec.seq_id) + " is already queued"};
  if (spec.prompt.empty()) return {admit_status::invalid, "the prompt has no tokens"};
  if (spec.max_tokens < 1)
    return {admit_status::invalid, "max_tokens must be >= 1; got " + std::to_string(spec.max_tokens)};
  if (spec.embed && spec.prompt_logits)
    return {admit_status::invalid, "an embedding request has no logits to score its prompt with (prompt_logprobs)"};
  const auto n = static_cast<int64_t>(spec.prompt.size());
  if (n + 1 > cfg_.max_model_len)
    return {admit_status::prompt_too_long,
            "prompt has " + std::to_string(n) + " tokens; max_model_len is " + std::to_string(cfg_.max_model_len) +
                " (the prompt and at least one generated token must fit)"};
  if (static_cast<int32_t>(waiting_.size()) >= cfg_.max_waiting)
    return {admit_status::queue_full,
            "the server already has " + std::to_string(waiting_.size()) + " requests waiting (max_waiting); retry later"};
  sequence s;
  s.num_prompt = static_cast<int32_t>(n);
  s.max_total = static_cast<int32_t>(std::min<int64_t>(n + spec.max_tokens, cfg_.max_model_len));
  s.tokens = spec.prompt;
  s.arrival = next_arrival_++;
  s.arrival_time = clock::now();
  s.spec = std::move(spec);
  int64_t id = s.spec.seq_id;
  const auto& queued = seqs_.emplace(id, std::move(s)).first->second;
  if (prefix_) prefix_->add(id, queued.tokens, /*reuse=*/!queued.spec.prompt_logits, queued.spec.adapter_identity,
                           queued.spec.cache_salt);
  insert_sorted(waiting_, id);
  policy_->on_waiting(view(queued));
  return {};
}

int32_t scheduler::chunk_limit(const sequence& s, int32_t budget) const {
  int32_t n = static_cast<int32_t>(s.tokens.size()) - s.num_computed;
  // Only a prefill can be chunked; a decode is one token.
  if (n > 1 && cfg_.long_prefill_token_threshold > 0) n = std::min(n, cfg_.long_prefill_token_threshold);
  if (n > 1 && s.spec.prompt_logits) n = std::min(n, std::max(cfg_.max_prompt_logits_chunk, 1));
  return std::min(n, budget);
}

bool scheduler::leader_computing_prompt(const sequence& s) const {
  if (s.spec.prompt_leader < 0) return false;
  auto it = seqs_.find(s.spec.prompt_leader);
  if (it == seqs_.end()) return false;  // it left: whatever it computed is in the cache
  const auto& leader = it->second;
  int32_t full = leader.num_prompt / alloc_.block_size() * alloc_.block_size();
  if (full == 0) return false;  // no full block to share
  // A waiting leader (not yet admitted, or preempted) counts as computing: it will be admitted.
  return !leader.running || leader.num_computed < full;
}

// Drafts for a decoding sequence (prompt lookup's, or the draft model's last guesses): within the
// step's budget (the token itself needs one) and so that all of them plus the token after cannot
// pass the sequence's length limit. They end before any stop id: verification goes on past an
// accepted draft, and nothing may be sampled after a token that ends the sequence (a grammar
// would find no token allowed there).
std::vector<int32_t> scheduler::drafts_for(const sequence& s, int32_t budget) const {
  if (!speculating_ || s.spec.embed) return {};
  const auto room = std::min<int64_t>(budget - 1, int64_t{s.max_total} - static_cast<int64_t>(s.tokens.size()) - 1);
  if (room <= 0) return {};
  std::vector<int32_t> drafts;
  if (cfg_.draft_model)
    drafts.assign(s.proposed.begin(), s.proposed.begin() + std::min<ptrdiff_t>(std::ssize(s.proposed), room));
  else
    drafts = propose_ngram_drafts(s.tokens, cfg_.speculative, static_cast<int32_t>(room));
  const auto& stops = s.spec.stop_ids;
  drafts.erase(std::find_first_of(drafts.begin(), drafts.end(), stops.begin(), stops.end()), drafts.end());
  return drafts;
}

void scheduler::add_to_plan(sequence& s, int32_t n, step_plan& plan, std::span<const int32_t> drafts,
                            int64_t reserved_blocks) {
  const auto d = static_cast<int32_t>(drafts.size());
  scheduled_seq e;
  e.seq_id = s.spec.seq_id;
  e.start_pos = s.num_computed;
  e.num_tokens = n + d;
  e.num_draft = d;
  e.sample = s.num_computed + n == static_cast<int32_t>(s.tokens.size());
  // The draft model's positions past the chunk: as many guesses as free blocks (less what decodes
  // still to plan need) allow, and only while a next step could carry one: the token this step
  // samples plus a guess must fit the length limit (a one-token request, a beam-search probe,
  // guesses nothing).
  if (cfg_.draft_model && speculating_ && e.sample && !s.spec.embed) {
    const int32_t end = e.start_pos + e.num_tokens;
    // As many guesses as the sequence's acceptance pays for (draft_length.hpp).
    if (!s.guesses) s.guesses.emplace(cfg_.draft_cost, cfg_.speculative.num_tokens);
    int32_t look = std::min(s.guesses->want(), s.max_total - end - 1);
    while (look > 0 && alloc_.blocks_needed(e.seq_id, end + look) > alloc_.num_free_blocks() - reserved_blocks) --look;
    if (look > 0) {
      bool ok = grow(e.seq_id, end + look);
      TROUPE_ASSERT(ok);
      e.num_lookahead = look;
    }
  }
  e.first_scheduled = !s.ever_scheduled;
  if (prefix_ && e.first_scheduled) e.num_cached_tokens = prefix_->num_cached_tokens(e.seq_id);
  s.ever_scheduled = true;
  plan.seqs.push_back(e);
  plan.tokens.insert(plan.tokens.end(), s.tokens.begin() + s.num_computed, s.tokens.begin() + s.num_computed + n);
  plan.tokens.insert(plan.tokens.end(), drafts.begin(), drafts.end());
  auto table = alloc_.block_table(e.seq_id);
  // Only the blocks this step touches or reads: positions [0, start + n + d + lookahead).
  auto used = static_cast<size_t>(alloc_.blocks_for_tokens(s.num_computed + n + d + e.num_lookahead));
  TROUPE_ASSERT(used <= table.size());
  plan.blocks.insert(plan.blocks.end(), table.begin(), table.begin() + static_cast<ptrdiff_t>(used));
  // Blocks are published only for known tokens: a block that drafts complete is not (its K/V may
  // hold a rejected guess until the next step rewrites it).
  if (prefix_) prefix_->plan(e.seq_id, s.tokens, table, e.start_pos, n, plan.kv_loads, plan.kv_saves);
  plan.num_batched_tokens += n + d;
  plan.num_sampled += e.sample;
}

void scheduler::preempt(int64_t id, step_plan& plan) {
  auto& s = seqs_.at(id);
  alloc_.free(id);
  if (prefix_) prefix_->preempted(id);
  s.num_computed = 0;  // recomputation: prompt + output are prefilled again
  s.proposed.clear();
  s.running = false;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  insert_sorted(waiting_, id);
  policy_->on_waiting(view(s));
  plan.preempted.push_back(id);
  ++num_preemptions_;
}

step_plan scheduler::schedule() {
  step_plan plan;
  int32_t budget = cfg_.max_num_batched_tokens;
  // A static batch is closed once any member has produced a token.
  bool batch_decoding = false;
  for (int64_t id : running_) {
    const auto& s = seqs_.at(id);
    batch_decoding = batch_decoding || static_cast<int32_t>(s.tokens.size()) > s.num_prompt;
  }

  // 1. Decodes first: one token each, so a long prompt never delays them. When blocks run out,
  //    preempt from the far end of the policy order (never a sequence already planned: the loop
  //    walks from the front and takes victims from the back).
  std::vector<int64_t> order = running_;
  // Speculative decoding: what the decodes still to plan need for their own token (one budget
  // token and maybe a block each) is held back from drafts, so a guess never delays another
  // sequence's real token or preempts anyone.
  std::unordered_map<int64_t, int32_t> own_blocks;
  int64_t reserved_blocks = 0;
  int32_t reserved_budget = 0;
  speculating_ = cfg_.speculative.num_tokens > 0 &&
                 (cfg_.speculation_max_running <= 0 || std::ssize(running_) < cfg_.speculation_max_running);
  if (speculating_)
    for (int64_t id : order) {
      const auto& s = seqs_.at(id);
      if (static_cast<int32_t>(s.tokens.size()) - s.num_computed != 1) continue;
      own_blocks[id] = alloc_.blocks_needed(id, s.num_computed + 1);
      reserved_blocks += own_blocks[id];
      ++reserved_budget;
    }
  auto planned_or_gone = [&](int64_t id) {
    auto o = own_blocks.find(id);
    if (o == own_blocks.end()) return;
    reserved_blocks -= o->second;
    --reserved_budget;
    own_blocks.erase(o);
  };
  for (int64_t id : order) {
    if (budget == 0) break;
    auto it = seqs_.find(id);
    if (it == seqs_.end() || !it->second.running) continue;  // preempted earlier in this loop
    auto& s = it->second;
    if (static_cast<int32_t>(s.tokens.size()) - s.num_computed != 1) continue;  // prefilling
    bool self_preempted = false;
    while (!alloc_.can_allocate(id, s.num_computed + 1)) {
      int64_t victim = pick_victim(plan);
      preempt(victim, plan);
      planned_or_gone(victim);
      if (victim == id) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) continue;
    planned_or_gone(id);
    auto drafts = drafts_for(s, budget - reserved_budget);
    while (!drafts.empty() &&
           alloc_.blocks_needed(id, s.num_computed + 1 + static_cast<int64_t>(drafts.size())) >
               alloc_.num_free_blocks() - reserved_blocks)
      drafts.pop_back();
    bool ok = grow(id, s.num_computed + 1 + static_cast<int64_t>(drafts.size()));
    TROUPE_ASSERT(ok);
    add_to_plan(s, 1, plan, drafts, reserved_blocks);
    budget -= 1 + static_cast<int32_t>(drafts.size());
  }

  // Prompt chunks share a step that decodes only up to their own cap: that step's time is every
  // decoding stream's inter-token latency.
  if (cfg_.enable_chunked_prefill && cfg_.max_prefill_tokens_while_decoding > 0 && !plan.seqs.empty())
    budget = std::min(budget, cfg_.max_prefill_tokens_while_decoding);

  // 2. Running sequences in the middle of their prompt: the next chunk, shrunk to the budget and
  //    to the free blocks (no preemption for a prefill: it would evict decodes planned above).
  for (int64_t id : running_) {
    if (budget == 0) break;
    auto& s = seqs_.at(id);
    if (static_cast<int32_t>(s.tokens.size()) - s.num_computed <= 1) continue;
    int32_t n = chunk_limit(s, budget);
    auto cap = static_cast<int64_t>(alloc_.block_table(id).size() + alloc_.num_free_blocks()) * alloc_.block_size();
    n = static_cast<int32_t>(std::min<int64_t>(n, cap - s.num_computed));
    if (n <= 0) continue;
    bool ok = grow(id, s.num_computed + n);
    TROUPE_ASSERT(ok);
    add_to_plan(s, n, plan);
    budget -= n;
  }

  // 3. Admit waiting sequences in policy order: not after a preemption (the pool is short), not
  //    into a static batch that has started decoding, and each needs blocks for its first chunk.
  //    The policy gives the order once per step, for as many sequences as there are free slots.
  //    With prefix caching a sequence starts after its cached prefix; one still waiting for its
  //    shared-store look-up is not offered (the look-up answers within its budget).
  bool may_admit = plan.preempted.empty() && !(cfg_.static_batching && batch_decoding);
  // max_loras: the distinct adapters running, which admission may grow up to the cap.
  std::vector<int32_t> loras = cfg_.max_loras > 0 ? running_adapters() : std::vector<int32_t>{};
  bool hold_adapters = false;  // an adapter sequence ahead in the order is waiting for room
  std::vector<int64_t> eligible;
  if (prefix_ && may_admit)
    for (int64_t id : waiting_)
      if (!prefix_->waiting_remote(id) && !leader_computing_prompt(seqs_.at(id))) eligible.push_back(id);
  std::span<const int64_t> offered = prefix_ ? std::span<const int64_t>(eligible) : std::span<const int64_t>(waiting_);
  if (may_admit && budget > 0 && !offered.empty() && static_cast<int32_t>(running_.size()) < cfg_.max_num_seqs) {
    size_t room = std::min(static_cast<size_t>(cfg_.max_num_seqs) - running_.size(), offered.size());
    std::vector<int64_t> order;
    policy_->admit_order(offered, room, order);
    TROUPE_ASSERT(order.size() <= room);
    for (int64_t id : order) {
      if (budget == 0) break;
      auto pos = std::find(waiting_.begin(), waiting_.end(), id);
      TROUPE_ASSERT(pos != waiting_.end());  // a policy answers with waiting ids only
      auto& s = seqs_.at(id);
      const int32_t a = s.spec.adapter;
      const bool new_lora = cfg_.max_loras > 0 && a >= 0 && std::find(loras.begin(), loras.end(), a) == loras.end();
      if (a >= 0 && (hold_adapters || (new_lora && static_cast<int32_t>(loras.size()) >= cfg_.max_loras))) {
        hold_adapters = true;
        continue;
      }
      prefix::prefix_cache::hit hit;
      if (prefix_) hit = prefix_->match(id, s.tokens);
      s.num_computed = hit.num_tokens(alloc_.block_size());
      int32_t want = static_cast<int32_t>(s.tokens.size()) - s.num_computed;
      int32_t n = chunk_limit(s, budget);
      bool ok = (cfg_.enable_chunked_prefill || want <= budget) &&
                (prefix_ ? alloc_.allocate_with_prefix(id, hit.local, s.num_computed + n)
                         : alloc_.allocate(id, s.num_computed + n));
      if (!ok) {
        s.num_computed = 0;  // a waiting sequence holds nothing
        break;
      }
      if (prefix_) prefix_->admitted(id, hit, alloc_.block_table(id), s.num_prompt);
      if (new_lora) loras.push_back(a);
      waiting_.erase(pos);
      s.running = true;
      insert_sorted(running_, id);
      add_to_plan(s, n, plan);
      policy_->on_running(view(s));
      budget -= n;
    }
  }

  // Spans last: the buffers no longer grow.
  size_t tok = 0, blk = 0;
  plan.batch.reserve(plan.seqs.size());
  for (const auto& e : plan.seqs) {
    auto used = static_cast<size_t>(alloc_.blocks_for_tokens(e.start_pos + e.num_tokens + e.num_lookahead));
    step_sequence sq;
    sq.seq_id = e.seq_id;
    sq.tokens = std::span<const int32_t>(plan.tokens.data() + tok, static_cast<size_t>(e.num_tokens));
    sq.start_pos = e.start_pos;
    sq.block_table = std::span<const int32_t>(plan.blocks.data() + blk, used);
    // Prompt rows whose next token is a prompt token score it (prompt_logits): every row.
    const auto& s = seqs_.at(e.seq_id);
    sq.adapter = s.spec.adapter;
    if ((s.spec.prompt_logits && e.start_pos + 1 < s.num_prompt) || e.num_draft > 0)
      sq.logits = logits_mode::all;
    else
      sq.logits = !e.sample                                        ? logits_mode::none
                : s.spec.embed && !s.spec.embed_from_logits ? logits_mode::hidden
                                                            : logits_mode::last;
    plan.batch.push_back(sq);
    tok += static_cast<size_t>(e.num_tokens);
    blk += used;
  }
  return plan;
}

std::vector<seq_event> scheduler::update(const step_plan& plan, std::span<const int32_t> sampled,
                                        std::span<const int32_t> counts) {
  TROUPE_ASSERT(counts.empty() || counts.size() == static_cast<size_t>(plan.num_sampled));
  std::vector<seq_event> events;
  size_t k = 0, next = 0;  // sampled entry, and its first id in `sampled`
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const auto& e = plan.seqs[i];
    std::span<const int32_t> out;
    if (e.sample) {
      const int32_t c = counts.empty() ? 1 : counts[k];
      TROUPE_ASSERT(c >= 1 && c <= e.num_draft + 1 && next + static_cast<size_t>(c) <= sampled.size());
      out = sampled.subspan(next, static_cast<size_t>(c));
      next += static_cast<size_t>(c);
      ++k;
    }
    auto it = seqs_.find(e.seq_id);
    if (it == seqs_.end()) continue;  // finished while the step ran
    auto& s = it->second;
    // A sequence preempted after this plan was made would have num_computed reset; plans are
    // applied before the next schedule(), so this cannot happen.
    TROUPE_ASSERT(s.running && s.num_computed == e.start_pos);
    // With drafts, the K/V in the pool are right up to the last accepted draft: the last token
    // and the drafts the step's samples confirmed (the rest are rewritten later).
    const auto drafts = plan.batch[i].tokens.subspan(1);
    for (size_t j = 0; j + 1 < out.size(); ++j) TROUPE_ASSERT(out[j] == drafts[j]);
    s.num_computed += e.num_draft > 0 ? static_cast<int32_t>(out.size()) : e.num_tokens;
    s.proposed.clear();  // guesses after the old tokens (the executor's new ones come after update)
    if (s.guesses && e.sample)
      s.guesses->stepped(e.num_draft, e.num_draft > 0 ? static_cast<int32_t>(out.size()) - 1 : 0, e.num_lookahead > 0);
    seq_event ev{e.seq_id, {}, std::nullopt};
    if (s.spec.embed && e.sample) {  // the prompt is in: its embedding was the step's output
      if (prefix_) prefix_->computed(e.seq_id, s.tokens, alloc_.block_table(e.seq_id), s.num_computed);
      ev.finished = finish_reason::stop;
      remove(e.seq_id);
      events.push_back(std::move(ev));
      continue;
    }
    for (int32_t token : out) {
      s.tokens.push_back(token);
      ev.tokens.push_back(token);
      const auto& stops = s.spec.stop_ids;
      if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
        ev.finished = finish_reason::stop;
        break;
      }
      if (static_cast<int32_t>(s.tokens.size()) >= s.max_total) {
        ev.finished = finish_reason::length;
        break;
      }
    }
    // Drafts hold no stop id and end before the length limit, so every accepted one was appended.
    TROUPE_ASSERT(s.num_computed <= static_cast<int32_t>(s.tokens.size()));
    if (prefix_) prefix_->computed(e.seq_id, s.tokens, alloc_.block_table(e.seq_id), s.num_computed);
    // Blocks that only rejected drafts or the draft model's guesses reached go back now, not when
    // the sequence ends: held, they could make another sequence's real token preempt someone next step.
    if ((e.num_draft > 0 || e.num_lookahead > 0) && !ev.finished)
      alloc_.shrink(e.seq_id, static_cast<int64_t>(s.tokens.size()));
    if (ev.finished)
      remove(e.seq_id);
    else
      policy_->on_update(view(s));
    events.push_back(std::move(ev));
  }
  return events;
}

void scheduler::propose(int64_t seq_id, std::vector<int32_t> drafts) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || !it->second.running) return;
  it->second.proposed = std::move(drafts);
}

void scheduler::remove(int64_t id) {
  auto& s = seqs_.at(id);
  auto& q = s.running ? running_ : waiting_;
  q.erase(std::find(q.begin(), q.end(), id));
  alloc_.free(id);
  if (prefix_) prefix_->removed(id);
  seqs_.erase(id);
  policy_->on_finished(id);
}

bool scheduler::grow(int64_t id, int64_t num_tokens) {
  const size_t before = alloc_.block_table(id).size();
  if (!alloc_.allocate(id, num_tokens)) return false;
  // Blocks off the free list get new content: the prefix index must forget what they held.
  if (prefix_) prefix_->claimed(alloc_.block_table(id).subspan(before));
  return true;
}

std::vector<prefix::remote_lookup> scheduler::take_remote_lookups() {
  return prefix_ ? prefix_->take_remote_lookups() : std::vector<prefix::remote_lookup>{};
}

void scheduler::resolve_remote(int64_t seq_id, prefix::remote_blocks found) {
  if (prefix_) prefix_->resolve_remote(seq_id, std::move(found));
}

int64_t scheduler::pick_victim(const step_plan& plan) {
  // Running sequences not planned yet in this step: a planned one's blocks are in the plan.
  std::vector<int64_t> candidates;
  candidates.reserve(running_.size());
  for (int64_t id : running_)
    if (std::none_of(plan.seqs.begin(), plan.seqs.end(), [&](const scheduled_seq& e) { return e.seq_id == id; }))
      candidates.push_back(id);
  TROUPE_ASSERT(!candidates.empty());
  int64_t victim = policy_->preempt_victim(candidates);
  TROUPE_ASSERT(std::find(candidates.begin(), candidates.end(), victim) != candidates.end());
  return victim;
}

void scheduler::set_policy(std::unique_ptr<policy> pol) {
  TROUPE_ASSERT(pol != nullptr);
  policy_ = std::move(pol);
  auto order = [&](int64_t a, int64_t b) {
    if (before(a, b)) return true;
    if (before(b, a)) return false;
    return seqs_.at(a).arrival < seqs_.at(b).arrival;
  };
  std::sort(waiting_.begin(), waiting_.end(), order);
  std::sort(running_.begin(), running_.end(), order);
  std::vector<const sequence*> all;
  all.reserve(seqs_.size());
  for (const auto& [id, s] : seqs_) all.push_back(&s);
  std::sort(all.begin(), all.end(), [](const sequence* a, const sequence* b) { return a->arrival < b->arrival; });
  for (const sequence* s : all) {
    seq_view v = view(*s);
    v.num_computed_tokens = 0;  // as it was when it queued
    policy_->on_waiting(v);
    if (s->running) policy_->on_running(view(*s));
  }
}

bool scheduler::finish(int64_t seq_id, finish_reason) {
  if (!seqs_.count(seq_id)) return false;
  remove(seq_id);
  return true;
}

std::vector<int64_t> scheduler::requeue_running() {
  std::vector<int64_t> ids = running_;
  step_plan unused;
  while (!running_.empty()) preempt(running_.back(), unused);
  if (prefix_) prefix_->forget_all();  // the pool's contents are gone with the executor
  return ids;
}

bool scheduler::reset_prefix_cache() {
  if (!running_.empty()) return false;
  if (prefix_) prefix_->forget_all();
  return true;
}

std::vector<int64_t> scheduler::expire(clock::time_point now) {
  std::vector<int64_t> gone;
  for (const auto& [id, s] : seqs_)
    if (s.spec.deadline && *s.spec.deadline <= now) gone.push_back(id);
  std::sort(gone.begin(), gone.end());
  for (int64_t id : gone) remove(id);
  return gone;
}

sched_stats scheduler::stats() const {
  return {static_cast<int32_t>(running_.size()), static_cast<int32_t>(waiting_.size()), alloc_.num_free_blocks(),
          alloc_.num_total_blocks(), num_preemptions_};
}

std::vector<int64_t> scheduler::running_ids() const { return running_; }
std::vector<int64_t> scheduler::waiting_ids() const { return waiting_; }

std::span<const int32_t> scheduler::tokens(int64_t seq_id) const { return seqs_.at(seq_id).tokens; }

int32_t scheduler::num_output_tokens(int64_t seq_id) const {
  const auto& s = seqs_.at(seq_id);
  return static_cast<int32_t>(s.tokens.size()) - s.num_prompt;
}

int32_t scheduler::num_computed_tokens(int64_t seq_id) const { return seqs_.at(seq_id).num_computed; }

std::vector<int32_t> scheduler::running_adapters() const {
  std::vector<int32_t> out;
  for (int64_t id : running_)
    if (int32_t a = seqs_.at(id).spec.adapter; a >= 0 && std::find(out.begin(), out.end(), a) == out.end())
      out.push_back(a);
  return out;
}

void scheduler::check_invariants() const {
  alloc_.check_invariants();
  TROUPE_ASSERT(running_.size() + waiting_.size() == seqs_.size());
  TROUPE_ASSERT(static_cast<int32_t>(running_.size()) <= cfg_.max_num_seqs);
  for (int64_t id : running_) {
    const auto& s = seqs_.at(id);
    TROUPE_ASSERT(s.running);
    TROUPE_ASSERT(s.num_computed <= static_cast<int32_t>(s.tokens.size()));
    TROUPE_ASSERT(alloc_.block_table(id).size() >= static_cast<size_t>(alloc_.blocks_for_tokens(s.num_computed)));
  }
  for (int64_t id : waiting_) {
    const auto& s = seqs_.at(id);
    TROUPE_ASSERT(!s.running && s.num_computed == 0 && !alloc_.has(id));
  }
  if (cfg_.max_loras > 0) TROUPE_ASSERT(static_cast<int32_t>(running_adapters().size()) <= cfg_.max_loras);
  for (size_t i = 1; i < running_.size(); ++i) TROUPE_ASSERT(!before(running_[i], running_[i - 1]));
  for (size_t i = 1; i < waiting_.size(); ++i) TROUPE_ASSERT(!before(waiting_[i], waiting_[i - 1]));
  TROUPE_ASSERT(alloc_.num_sequences() <= running_.size());
  if (seqs_.empty()) TROUPE_ASSERT(alloc_.num_free_blocks() == alloc_.num_total_blocks());
  if (prefix_) {
    prefix_->check_invariants();
    for (int64_t id : running_) TROUPE_ASSERT(!prefix_->waiting_remote(id));
  }
}

}  // namespace troupe::sched
