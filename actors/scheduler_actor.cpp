// The scheduler actor: maps messages onto sched::scheduler, keeps one step in flight on the shard
// executor, turns step results into per-worker updates and records the request metrics. With a
// shared prefix cache it also sends each arriving request's Redis look-up to the look-up actor
// (answered, or given up on, within the fetch budget) and each step's filled blocks to the
// publisher; it never waits for either.
#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <cstdio>
#include <deque>
#include <optional>
#include <unordered_map>

#include "actors/messages.hpp"
#include "actors/prefix_cache_actor.hpp"
#include "actors/prefix_cache_messages.hpp"
#include "runtime/sched/prefill_pacer.hpp"

namespace troupe::actors {

namespace {

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

wire::finish_reason to_wire(sched::finish_reason r) {
  switch (r) {
    case sched::finish_reason::stop: return wire::finish_reason::stop;
    case sched::finish_reason::length: return wire::finish_reason::length;
    case sched::finish_reason::cancelled: return wire::finish_reason::cancelled;
    case sched::finish_reason::deadline: return wire::finish_reason::deadline;
    case sched::finish_reason::error: return wire::finish_reason::error;
  }
  return wire::finish_reason::error;
}

serve::finished_reason_label label(sched::finish_reason r) {
  switch (r) {
    case sched::finish_reason::stop: return serve::finished_reason_label::stop;
    case sched::finish_reason::length: return serve::finished_reason_label::length;
    case sched::finish_reason::error: return serve::finished_reason_label::error;
    default: return serve::finished_reason_label::abort;
  }
}

struct seq_meta {
  int32_t worker = 0;
  std::shared_ptr<serve::seq_sampling> sampling;
  clock::time_point received;
  std::optional<clock::time_point> first_scheduled, last_token;
  int64_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // set at first_scheduled
  int64_t generated = 0;
  int32_t max_tokens = 0;  // the request's max_tokens (0: an embed or rerank, which has none)
  std::optional<clock::time_point> first_token;
};

struct scheduler_state {
  static inline const char* name = "troupe.scheduler";
  context_ptr ctx;
  std::unique_ptr<sched::scheduler> core;
  std::unordered_map<int64_t, seq_meta> metas;
  std::vector<caf::actor> workers;
  caf::actor executor, supervisor;
  std::shared_ptr<const prefix_cache_handles> prefix;  // null: no shared store
  std::vector<std::vector<seq_update>> pending;  // per worker, flushed after each event
  bool in_flight = false;
  bool tick_armed = false;
  bool draining = false;
  bool drained_sent = false;
  clock::time_point drain_deadline;
  clock::time_point step_started;
  std::optional<sched::prefill_pacer> pacer;  // sizes prompt chunks beside decodes (null: fixed cap)
};

using self_ptr = caf::stateful_actor<scheduler_state>*;

void emit(self_ptr self, int64_t rid, seq_update u) {
  auto& st = self->state;
  auto it = st.metas.find(rid);
  if (it == st.metas.end()) return;
  u.rid = rid;
  st.pending[static_cast<size_t>(it->second.worker)].push_back(std::move(u));
}

void flush(self_ptr self) {
  auto& st = self->state;
  for (size_t w = 0; w < st.pending.size(); ++w) {
    if (st.pending[w].empty()) continue;
    self->send(st.workers[w], updates_msg{std::move(st.pending[w])});
    st.pending[w].clear();
  }
}

// Unloaded adapters (adapter_registry::retire) whose slot no sequence names any more (`named`,
// by slot; a slot past its end counts as named): the executor empties the slot, after every step
// sent before (this actor sends them all), and the weights go.
void release_drained_adapters(self_ptr self, const std::vector<bool>& named) {
  auto& st = self->state;
  if (st.in_flight || !st.executor) return;
  for (int32_t slot : st.ctx->facts.adapters->draining()) {
    if (static_cast<size_t>(slot) >= named.size() || named[static_cast<size_t>(slot)]) continue;
    self->send(st.executor, lora_install_msg{slot, nullptr});
    st.ctx->facts.adapters->free(slot);
  }
}

void publish_gauges(self_ptr self) {
  auto& st = self->state;
  auto s = st.core->stats();
  st.ctx->metrics->set_queue_sizes(s.num_running, s.num_waiting);
  st.ctx->metrics->set_kv_cache_usage(st.core->allocator().usage());
  if (const auto& reg = st.ctx->facts.adapters; reg && reg->size() > 0) {
    // Which slots the sequences of each queue name (a draining one too), read once for the gauge
    // and for releasing drained slots.
    const auto slots = reg->slots();
    auto named_by = [&](const std::vector<int64_t>& ids) {
      std::vector<bool> seen(slots.size());
      for (int64_t id : ids)
        if (int32_t a = st.core->adapter_of(id); a >= 0 && static_cast<size_t>(a) < seen.size())
          seen[static_cast<size_t>(a)] = true;
      return seen;
    };
    const auto running = named_by(st.core->running_ids()), waiting = named_by(st.core->waiting_ids());
    auto names = [&](const std::vector<bool>& seen) {  // in slot order
      std::string out;
      for (size_t a = 0; a < slots.size(); ++a)
        if (seen[a] && slots[a]) {
          if (!out.empty()) out += ',';
          out += slots[a]->name;
        }
      return out;
    };
    // max_lora: vLLM's label is its max_loras; without a cap, every loaded adapter may run.
    const int32_t cap = st.core->config().max_loras;
    st.ctx->metrics->set_lora_requests(cap > 0 ? cap : static_cast<int64_t>(reg->live().size()), names(running),
                                       names(waiting));
    std::vector<bool> named(slots.size());
    for (size_t a = 0; a < slots.size(); ++a) named[a] = running[a] || waiting[a];
    release_drained_adapters(self, named);
  }
  if (const auto* pc = st.core->prefix_cache()) st.ctx->prefix_metrics->set_local(pc->stats());
}

// A request ended: its finish reason and vLLM's per-request histograms.
void record_finished(self_ptr self, const seq_meta& m, serve::finished_reason_label why) {
  const auto now = clock::now();
  auto& metrics = *self->state.ctx->metrics;
  metrics.add_finished(why);
  metrics.observe_e2e(seconds(now - m.received));
  serve::finished_request r;
  r.prompt_tokens = m.prompt_tokens;
  r.generation_tokens = m.generated;
  r.max_tokens = m.max_tokens;
  if (m.first_scheduled) {
    r.inference_seconds = seconds(now - *m.first_scheduled);
    if (m.first_token) {
      r.prefill_seconds = seconds(*m.first_token - *m.first_scheduled);
      r.decode_seconds = seconds(now - *m.first_token);
    }
  }
  metrics.observe_finished(r);
}

// A sequence left the scheduler: tell its worker, record the metrics, forget it.
void finished(self_ptr self, int64_t rid, sched::finish_reason why, std::optional<wire::wire_error> err = {},
              int32_t token = -1, std::optional<token_logprobs> logprobs = {}) {
  auto& st = self->state;
  auto it = st.metas.find(rid);
  if (it == st.metas.end()) return;
  seq_update u;
  u.token = token;
  u.logprobs = std::move(logprobs);
  u.finished = to_wire(why);
  u.error = std::move(err);
  u.first_scheduled = it->second.first_scheduled;
  u.cached_prompt_tokens = it->second.cached_prompt_tokens;
  emit(self, rid, std::move(u));
  record_finished(self, it->second, label(why));
  st.metas.erase(it);
}

void check_drained(self_ptr self) {
  auto& st = self->state;
  if (!st.draining || st.drained_sent) return;
  if (clock::now() >= st.drain_deadline) {
    // Grace is over: every request still queued ends now with `cancelled`.
    std::vector<int64_t> ids = st.core->running_ids();
    auto w = st.core->waiting_ids();
    ids.insert(ids.end(), w.begin(), w.end());
    for (int64_t id : ids)
      if (st.core->finish(id, sched::finish_reason::cancelled)) finished(self, id, sched::finish_reason::cancelled);
    flush(self);
  }
  if (st.core->idle() && !st.in_flight) {
    // The marker follows each worker's last updates (messages between two actors keep their
    // order), and the workers pass it on behind their last output: when the gateway has it from
    // every worker, every final `done` has been written.
    st.drained_sent = true;
    publish_gauges(self);
    for (auto& w : st.workers) self->send(w, drained_atom::value);
  }
}

void arm_tick(self_ptr self) {
  auto& st = self->state;
  if (st.tick_armed || (st.core->idle() && !st.draining)) return;
  st.tick_armed = true;
  self->delayed_send(self, std::chrono::milliseconds(20), tick_atom::value);
}

void expire_deadlines(self_ptr self) {
  auto& st = self->state;
  auto gone = st.core->expire(clock::now());
  for (int64_t id : gone) finished(self, id, sched::finish_reason::deadline);
  if (!gone.empty()) publish_gauges(self);
}

void on_step_done(self_ptr self, const std::shared_ptr<serve::step_job>& job, serve::step_outcome& out);
void on_step_failed(self_ptr self, const caf::actor& target, const caf::error& err);

void kick(self_ptr self) {
  auto& st = self->state;
  expire_deadlines(self);
  flush(self);
  if (st.in_flight || !st.executor || st.core->idle()) {
    check_drained(self);
    arm_tick(self);
    return;
  }
  auto now = clock::now();
  auto job = std::make_shared<serve::step_job>();
  job->plan = st.core->schedule();
  if (!job->plan.preempted.empty()) st.ctx->metrics->add_preemptions(static_cast<int64_t>(job->plan.preempted.size()));
  if (job->plan.empty()) {
    arm_tick(self);
    return;
  }
  for (size_t i = 0; i < job->plan.seqs.size(); ++i) {
    const auto& e = job->plan.seqs[i];
    auto& m = st.metas.at(e.seq_id);
    if (job->plan.batch[i].logits == logits_mode::all && e.num_draft == 0) job->prompt_scorers.push_back(m.sampling);
    if (e.first_scheduled) {
      m.first_scheduled = now;
      m.cached_prompt_tokens = e.num_cached_tokens;
      st.ctx->metrics->observe_queue(seconds(now - m.received));
    }
    if (e.sample) job->samplers.push_back(m.sampling);
  }
  st.in_flight = true;
  st.step_started = now;
  caf::actor target = st.executor;
  self->request(target, caf::infinite, step_msg{job})
      .then([=](step_done_msg& d) { on_step_done(self, job, *d.outcome); },
            [=](caf::error& err) { on_step_failed(self, target, err); });
}

void on_step_done(self_ptr self, const std::shared_ptr<serve::step_job>& job, serve::step_outcome& out) {
  auto& st = self->state;
  st.in_flight = false;
  auto now = clock::now();
  const auto& plan = job->plan;
  if (!out.step_error.empty()) {
    // The engine refused the batch before computing anything: end its sequences, keep serving.
    std::fprintf(stderr, "troupe serve: step failed: %s\n", out.step_error.c_str());
    for (const auto& e : plan.seqs)
      if (st.core->finish(e.seq_id, sched::finish_reason::error))
        finished(self, e.seq_id, sched::finish_reason::error,
                 wire::wire_error{wire::error_code::internal, "the engine failed the step: " + out.step_error, {}});
  } else {
    // Prefill speed for the fetch-or-recompute decision (steps of at least one block's tokens),
    // and the blocks this step filled to the publisher (dropped, counted, when its queue is full).
    if (st.ctx->prefix_cost && plan.num_batched_tokens >= 16 && out.engine_seconds > 0)
      st.ctx->prefix_cost->observe_prefill(plan.num_batched_tokens, out.engine_seconds);
    if (st.prefix && !out.saved.empty()) publish_blocks(*st.prefix, std::move(out.saved), *st.ctx->prefix_metrics);
    if (st.pacer) {
      int32_t decodes = 0, prompt_tokens = 0, prompt_span = 0;
      for (const auto& e : plan.seqs) {
        const bool decode = e.num_tokens == 1 || e.num_draft > 0;  // drafts ride on a decode
        (decode ? decodes : prompt_tokens) += e.num_tokens;
        if (!decode) prompt_span = std::max(prompt_span, e.start_pos + e.num_tokens);
      }
      st.pacer->observe(decodes, prompt_tokens, out.engine_seconds, prompt_span);
      const int32_t cap = st.pacer->cap();
      st.core->set_max_prefill_tokens_while_decoding(cap);
      st.ctx->metrics->set_prefill_pacing(cap, st.pacer->decode_step_seconds(), st.pacer->seconds_per_prompt_token());
    }
    for (const auto& [id, why] : out.seq_errors)
      if (st.core->finish(id, sched::finish_reason::error))
        finished(self, id, sched::finish_reason::error,
                 wire::wire_error{wire::error_code::internal, "sampling failed: " + why, {}});
    // Prompt logprobs go out before the step's tokens (and before a done of the same step).
    for (auto& [id, lps] : out.prompt_logprobs) {
      auto it = st.metas.find(id);
      if (it == st.metas.end()) continue;
      seq_update u;
      u.prompt_logprobs = std::move(lps);
      emit(self, id, std::move(u));
    }
    // Embeddings too: the done of the same step follows.
    for (auto& [id, v] : out.embeddings) {
      auto it = st.metas.find(id);
      if (it == st.metas.end()) continue;
      st.ctx->metrics->add_prompt_tokens(it->second.prompt_tokens);  // a generating one counts at its first token
      seq_update u;
      u.embedding = std::move(v);
      emit(self, id, std::move(u));
    }
    // The logprobs of this step's tokens, by sequence, in token order.
    std::unordered_map<int64_t, std::deque<token_logprobs>> step_logprobs;
    for (auto& [id, lp] : out.logprobs) step_logprobs[id].push_back(std::move(lp));
    auto logprobs_of_seq = [&](int64_t seq) -> std::optional<token_logprobs> {
      auto lp = step_logprobs.find(seq);
      if (lp == step_logprobs.end() || lp->second.empty()) return std::nullopt;
      auto first = std::move(lp->second.front());
      lp->second.pop_front();
      return first;
    };
    // Speculative decoding: drafts verified and accepted (a failed sequence's lone -1 counts none).
    for (size_t i = 0, k = 0; i < plan.seqs.size(); ++i) {
      if (!plan.seqs[i].sample) continue;
      const int32_t c = out.counts.empty() ? 1 : out.counts[k];
      ++k;
      if (plan.seqs[i].num_draft > 0) st.ctx->metrics->add_spec_decode(plan.seqs[i].num_draft, c - 1);
    }
    for (const auto& ev : st.core->update(plan, out.sampled, out.counts)) {
      auto it = st.metas.find(ev.seq_id);
      if (it == st.metas.end()) continue;
      auto& m = it->second;
      if (!ev.tokens.empty()) {
        st.ctx->metrics->add_generation_tokens(static_cast<int64_t>(ev.tokens.size()));
        m.generated += static_cast<int64_t>(ev.tokens.size());
        if (!m.first_token) m.first_token = now;
        if (!m.last_token) {
          st.ctx->metrics->observe_ttft(seconds(now - m.received));
          st.ctx->metrics->add_prompt_tokens(m.prompt_tokens);
        } else {
          st.ctx->metrics->observe_inter_token(seconds(now - *m.last_token));
        }
        m.last_token = now;
      }
      // One update per token (a step with accepted drafts has several), the last one ending the
      // sequence when it finished.
      for (size_t j = 0; j < ev.tokens.size(); ++j) {
        const bool last = j + 1 == ev.tokens.size();
        if (last && ev.finished) break;
        seq_update u;
        u.token = ev.tokens[j];
        u.logprobs = logprobs_of_seq(ev.seq_id);
        u.first_scheduled = m.first_scheduled;
        u.cached_prompt_tokens = m.cached_prompt_tokens;
        emit(self, ev.seq_id, std::move(u));
      }
      if (ev.finished) {
        const bool token = !ev.tokens.empty();
        finished(self, ev.seq_id, *ev.finished, std::nullopt, token ? ev.tokens.back() : -1,
                 token ? logprobs_of_seq(ev.seq_id) : std::nullopt);
      }
    }
    // The draft model's guesses after the tokens just taken: the next step's drafts.
    for (auto& [id, guesses] : out.proposals) st.core->propose(id, std::move(guesses));
    if (!out.draft_error.empty()) std::fprintf(stderr, "troupe serve: draft model step failed: %s\n", out.draft_error.c_str());
  }
  publish_gauges(self);
  flush(self);
  // Loop time: planning, messages both ways, the step, applying it and sending the updates; the
  // next step starts right after (kick), so loop - engine is the runtime's overhead per step.
  st.ctx->metrics->add_step(out.engine_seconds, seconds(clock::now() - st.step_started), plan.num_batched_tokens);
  kick(self);
}

// The executor's KV pool is gone: recompute every running sequence on the executor the
// supervisor starts next, and forget every cached prefix block (requeue_running). Samplers are
// rebuilt to the tokens the scheduler has seen, so seeded requests still give the same tokens.
void requeue_all(self_ptr self) {
  auto& st = self->state;
  for (int64_t id : st.core->requeue_running()) {
    auto& m = st.metas.at(id);
    auto all = st.core->tokens(id);
    auto known = all.subspan(static_cast<size_t>(m.prompt_tokens));
    m.sampling = serve::rebuild_sampling(*m.sampling, known);
    st.ctx->metrics->add_preemptions(1);
  }
}

void on_step_failed(self_ptr self, const caf::actor& target, const caf::error& err) {
  auto& st = self->state;
  st.in_flight = false;
  if (st.executor == target) st.executor = caf::actor{};  // a replacement may already be here
  std::fprintf(stderr, "troupe serve: shard executor failed during a step (%s); re-queueing %d running requests\n",
               to_string(err).c_str(), st.core->stats().num_running);
  requeue_all(self);
  publish_gauges(self);
  kick(self);
}

// Sends the look-ups of newly arrived requests. Each waits (others go ahead) until its answer or
// the fetch budget, whichever comes first: the request's own timeout is the budget, so a slow,
// hung or restarting look-up actor never holds a request longer; it is then admitted as a miss.
// The actor gets a deadline a little earlier, so an answer normally beats the timeout.
void dispatch_lookups(self_ptr self) {
  auto& st = self->state;
  auto lookups = st.core->take_remote_lookups();
  if (lookups.empty()) return;
  const auto budget = st.ctx->prefix.remote_opts.fetch_budget;
  const auto slack = std::min<std::chrono::milliseconds>(budget / 10, std::chrono::milliseconds(20));
  for (auto& q : lookups) {
    const int64_t id = q.seq_id;
    if (!st.prefix || !st.prefix->lookup) {
      st.core->resolve_remote(id, {});
      continue;
    }
    auto deadline = clock::now() + budget - slack;
    self->request(st.prefix->lookup, budget, prefix_lookup_msg{std::move(q), deadline})
        .then(
            [=](prefix_found_msg& f) {
              self->state.core->resolve_remote(f.seq_id, std::move(f.found));
              kick(self);
            },
            [=](caf::error&) {  // timed out, or the actor is gone: recompute
              self->state.core->resolve_remote(id, {});
              kick(self);
            });
  }
}

caf::behavior scheduler_actor(self_ptr self, context_ptr ctx, std::vector<caf::actor> workers, caf::actor executor,
                              caf::actor supervisor, std::shared_ptr<const prefix_cache_handles> prefix) {
  auto& st = self->state;
  st.ctx = ctx;
  st.core = std::make_unique<sched::scheduler>(ctx->sched, ctx->num_blocks, ctx->cfg.block_size,
                                               ctx->policy->initial());
  st.workers = std::move(workers);
  st.pending.resize(st.workers.size());
  st.executor = std::move(executor);
  st.supervisor = std::move(supervisor);
  st.prefix = std::move(prefix);
  const auto& c = ctx->cfg;
  if (c.enable_chunked_prefill && c.max_prefill_tokens_while_decoding > 0 && c.decode_slowdown_percent > 0)
    st.pacer.emplace(c.decode_slowdown_percent / 100.0, c.max_prefill_tokens_while_decoding);
  publish_gauges(self);
  return {
      [=](submit_msg& m) {
        auto& st = self->state;
        auto reject = [&](wire::error_code code, std::string msg) {
          seq_update u;
          u.rid = m.rid;
          u.rejected = true;
          u.error = wire::wire_error{code, std::move(msg), {}};
          st.pending[static_cast<size_t>(m.worker)].push_back(std::move(u));
          flush(self);
        };
        if (st.draining) return reject(wire::error_code::shutting_down, "the server is shutting down");
        if (m.spec.adapter >= 0 && !st.ctx->facts.adapters->is_live(m.spec.adapter))
          return reject(wire::error_code::invalid_value, "the LoRA adapter this request names was unloaded");
        int64_t prompt = static_cast<int64_t>(m.spec.prompt.size());
        const int32_t max_tokens = m.spec.embed ? 0 : m.spec.max_tokens;
        auto a = st.core->add(std::move(m.spec));
        switch (a.status) {
          case sched::admit_status::ok: break;
          case sched::admit_status::prompt_too_long: return reject(wire::error_code::prompt_too_long, a.message);
          case sched::admit_status::queue_full: return reject(wire::error_code::too_many_requests, a.message);
          case sched::admit_status::invalid: return reject(wire::error_code::invalid_value, a.message);
        }
        seq_meta meta;
        meta.worker = m.worker;
        meta.sampling = std::move(m.sampling);
        meta.received = m.received;
        meta.prompt_tokens = prompt;
        meta.max_tokens = max_tokens;
        st.metas.emplace(m.rid, std::move(meta));
        dispatch_lookups(self);
        publish_gauges(self);
        kick(self);
      },
      [=](cancel_msg& m) {
        if (self->state.core->finish(m.rid, sched::finish_reason::cancelled)) {
          finished(self, m.rid, sched::finish_reason::cancelled);
          publish_gauges(self);
        }
        kick(self);
      },
      [=](stop_msg& m) {
        // The worker already sent `done`: only free the blocks and record the metrics.
        auto& st = self->state;
        if (st.core->finish(m.rid, sched::finish_reason::stop)) {
          auto it = st.metas.find(m.rid);
          record_finished(self, it->second, serve::finished_reason_label::stop);
          st.metas.erase(it);
          publish_gauges(self);
        }
        kick(self);
      },
      [=](tick_atom) {
        self->state.tick_armed = false;
        kick(self);
      },
      [=](drain_atom, int64_t grace_ms) {
        auto& st = self->state;
        st.draining = true;
        st.drain_deadline = clock::now() + std::chrono::milliseconds(grace_ms);
        kick(self);
      },
      [=](executor_changed& m) {
        // A step in flight on the old executor fails and re-queues (on_step_failed). Without
        // one, the new executor's pool is empty all the same: cached prefix blocks must go.
        if (!self->state.in_flight) requeue_all(self);
        self->state.executor = m.executor;
        publish_gauges(self);
        kick(self);
      },
      [=](prefix_changed& m) { self->state.prefix = std::move(m.handles); },
      // An adapter loaded while the server runs: into the executor between two steps; its reply
      // goes to the loader.
      [=](lora_install_msg& m) { return self->delegate(self->state.executor, std::move(m)); },
      [=](lora_retired_msg&) {
        publish_gauges(self);  // releases the slot now if nothing names it
      },
      [=](lora_install_reply& r) {  // the executor emptied a drained slot
        if (!r.ok) std::fprintf(stderr, "troupe serve: emptying a LoRA adapter slot failed: %s\n", r.error.c_str());
      },
      [=](worker_changed& m) { self->state.workers.at(static_cast<size_t>(m.index)) = m.worker; },
      // Admin: between two steps (a step in flight only reads its own plan); no request moves.
      [=](set_policy_msg& m) {
        auto r = self->state.ctx->policy->swap(*self->state.core, m.policy, m.config);
        return set_policy_reply{r.ok, std::move(r.policy), std::move(r.previous), std::move(r.error)};
      },
      // Dev: between two steps, and only while nothing runs (core->reset_prefix_cache).
      [=](reset_prefix_cache_msg&) {
        auto& st = self->state;
        const bool ok = st.core->reset_prefix_cache();
        if (ok) publish_gauges(self);
        return reset_prefix_cache_reply{ok, static_cast<int32_t>(st.core->running_ids().size())};
      },
  };
}

}  // namespace

caf::actor spawn_scheduler(caf::local_actor* parent, context_ptr ctx, std::vector<caf::actor> workers,
                           caf::actor executor, caf::actor supervisor,
                           std::shared_ptr<const prefix_cache_handles> prefix) {
  return parent->spawn(scheduler_actor, std::move(ctx), std::move(workers), std::move(executor),
                       std::move(supervisor), std::move(prefix));
}

}  // namespace troupe::actors
