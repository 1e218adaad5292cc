// A tokenizer worker: builds requests (text / chat -> ids, sampling defaults) and submits them to
// the scheduler; turns the scheduler's token updates into framed events for the gateway
// (streaming detokenisation, stop strings). Off the scheduler's path by design.
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <atomic>
#include <unordered_map>

#include "actors/messages.hpp"
#include "actors/scheduler_actor.hpp"
#include "runtime/serve/beam_request.hpp"
#include "runtime/serve/request_log.hpp"
#include "runtime/serve/response.hpp"
#include "runtime/wire/event_codec.hpp"

namespace troupe::actors {

namespace {

// A prompt's beam search (use_beam_search): its completions are sequences first_rid .. + n - 1
// for the gateway, written whole at the end; meanwhile each round's probes run as sequences of
// the worker's own (negative) ids.
struct beam_job {
  std::shared_ptr<const wire::generate_request> req;
  clock::time_point received;
  int32_t prompt_index = 0;       // p: its completions are p * n .. p * n + n - 1 of the request
  serve::beam_request search;
  std::vector<int64_t> probes;    // this round's probe ids, live beam i's at [i]
  std::optional<clock::time_point> first_scheduled;
};

struct worker_state {
  static inline const char* name = "troupe.tokenizer";
  context_ptr ctx;
  int32_t index = 0;
  caf::actor scheduler, gateway;
  std::unordered_map<int64_t, serve::response> live;
  std::unordered_map<int64_t, beam_job> beams;         // by first_rid
  std::unordered_map<int64_t, int64_t> probe_of;       // probe id -> its job's first_rid
  // A prompt's n completions, for vLLM's request_max_num_generation_tokens: by the first one's id,
  // those still running and the most tokens one of the ended ones generated.
  struct sibling_group {
    int32_t left = 0;
    int64_t most = 0;
  };
  std::unordered_map<int64_t, sibling_group> groups;
  std::unordered_map<int64_t, int64_t> group_of;  // completion id -> its group's first id
};

using self_ptr = caf::stateful_actor<worker_state>*;

out_item error_item(int64_t rid, wire::wire_error e, const std::string& id) {
  e.id = id;
  out_item it{rid, {}, true};
  wire::append_event_frame(it.bytes, e);
  return it;
}

void send_out(self_ptr self, std::vector<out_item> items) {
  if (!items.empty()) self->send(self->state.gateway, output_msg{std::move(items)});
}

// Requests come only from the gateway, and the server opens its port before the supervisor's
// gateway_msg reaches this worker: a request that won that race was answered to nobody (a client
// waiting for ever, ~1 start in 5 under test). The sender of a request is the gateway to answer.
void answer_to_sender(self_ptr self) {
  if (auto gw = caf::actor_cast<caf::actor>(self->current_sender())) self->state.gateway = std::move(gw);
}

// One error answers the request; the gateway also forgets its other completions' (inputs') ids.
void refuse_all(self_ptr self, const generate_msg& m, const wire::wire_error& error) {
  const auto& r = *m.req;
  std::vector<out_item> items{error_item(m.rid, error, r.id)};
  for (int32_t i = 1; i < r.sequences(); ++i) items.push_back(out_item{m.rid + i, {}, true});
  send_out(self, std::move(items));
}

// Sequence `rid` of request r (received then) with its prompt and the request's scheduling fields;
// the caller adds the rest of the spec and sampling.
submit_msg submit_for(self_ptr self, const wire::generate_request& r, clock::time_point received, int64_t rid,
                      std::vector<int32_t> prompt) {
  submit_msg s;
  s.rid = rid;
  s.worker = self->state.index;
  s.received = received;
  s.spec.seq_id = rid;
  s.spec.prompt = std::move(prompt);
  s.spec.priority = r.priority;
  s.spec.tenant = r.tenant;
  s.spec.cache_salt = r.cache_salt;
  if (r.deadline_ms) s.spec.deadline = received + std::chrono::milliseconds(*r.deadline_ms);
  return s;
}

// Completion (or input) i of the request: sequence m.rid + i (the gateway reserved the ids).
submit_msg submit_for(self_ptr self, const generate_msg& m, int32_t i, std::vector<int32_t> prompt) {
  return submit_for(self, *m.req, m.received, m.rid + i, std::move(prompt));
}

// What a pooled request's done carries: an embedding (the last hidden state), a rerank score or a
// classifier's label probabilities (both from the last logits row).
enum class pooled { embedding, score, labels };

// Requests pooled at their prompt's end (embed, rerank, classify): input i is sequence rid + i (the
// gateway reserved n ids) with its own prompt, finished by the step that computes its last token
// (request_spec::embed) with no token. set_up(sampling) fills in what finishes it.
template <class SetUp>
void submit_pooled(self_ptr self, generate_msg& m, std::vector<std::vector<int32_t>>& prompts, pooled kind,
                   SetUp&& set_up) {
  auto& st = self->state;
  const auto& r = *m.req;
  for (int32_t i = 0; i < r.n; ++i) {
    auto& prompt = prompts[static_cast<size_t>(i)];
    serve::output_rules rules{};
    if (r.n > 1) rules.index = i;
    rules.rerank = kind == pooled::score;
    if (kind == pooled::labels) rules.labels = st.ctx->facts.labels;
    st.live.emplace(m.rid + i, serve::response(r.id, /*stream=*/false, st.ctx->facts.tok, std::move(rules),
                                               static_cast<int64_t>(prompt.size()), m.received));
    auto s = submit_for(self, m, i, prompt);
    s.spec.max_tokens = 1;
    s.spec.embed = true;
    s.spec.embed_from_logits = kind != pooled::embedding;
    s.sampling = std::make_shared<serve::seq_sampling>(defaults_from(st.ctx->facts.generation), std::move(prompt));
    set_up(*s.sampling);
    self->send(st.scheduler, std::move(s));
  }
}

// An embed request: each input's done carries its embedding, or (task classify) its label
// probabilities and likeliest label.
void submit_embed(self_ptr self, generate_msg& m) {
  auto b = serve::build_embed(*m.req, self->state.ctx->facts);
  if (!b.req) return refuse_all(self, m, b.error);
  if (m.req->embed->classify)
    return submit_pooled(self, m, b.req->prompts, pooled::labels, [](serve::seq_sampling& s) { s.classify = true; });
  submit_pooled(self, m, b.req->prompts, pooled::embedding, [&](serve::seq_sampling& s) { s.embed = b.req->options; });
}

// A rerank request: each document's prompt is the reranker's (build_rerank), its done carries the score.
void submit_rerank(self_ptr self, generate_msg& m) {
  auto b = serve::build_rerank(*m.req, self->state.ctx->facts);
  if (!b.req) return refuse_all(self, m, b.error);
  submit_pooled(self, m, b.req->prompts, pooled::score, [&](serve::seq_sampling& s) { s.rerank = b.req->tokens; });
}

// How completion i of request r (prompt built as br) is written: stop strings, tool calls, the
// reasoning split, its index among several.
serve::output_rules rules_for(self_ptr self, const wire::generate_request& r, const serve::built_request& br, int32_t i,
                              bool prompt_logprobs) {
  const auto& st = self->state;
  serve::output_rules rules{br.stop, br.min_tokens, /*find_tool_calls=*/!r.tools_json.empty(),
                            br.reasoning_opened_in_prompt, prompt_logprobs};
  if (r.sequences() > 1) rules.index = i;
  rules.include_stop_str_in_output = br.include_stop_str_in_output;
  rules.skip_special_tokens = br.skip_special_tokens;
  rules.tool_format = st.ctx->facts.tool_format;
  if (rules.tool_format != serve::tool_call_format::hermes) rules.tools_json = r.tools_json;
  if (r.return_prompt_ids) rules.prompt_ids = br.prompt;
  return rules;
}

// Completion rid ended having generated `tokens`; once its prompt's completions all have, the most
// any of them generated is observed (vLLM's request_max_num_generation_tokens).
void completion_ended(self_ptr self, int64_t rid, int64_t tokens) {
  auto& st = self->state;
  auto g = st.group_of.find(rid);
  if (g == st.group_of.end()) return;  // not a generate's (an embed or rerank input)
  auto grp = st.groups.find(g->second);
  grp->second.most = std::max(grp->second.most, tokens);
  if (--grp->second.left == 0) {
    st.ctx->metrics->observe_max_generation_tokens(grp->second.most);
    st.groups.erase(grp);
  }
  st.group_of.erase(g);
}

// Submits a beam job's current round: one probe per live beam, ids of the worker's own.
void submit_round(self_ptr self, int64_t first_rid) {
  auto& st = self->state;
  auto& job = st.beams.at(first_rid);
  const auto& r = *job.req;
  const auto& br = job.search.built();
  job.probes.clear();
  for (auto& prompt : job.search.probes()) {
    // Negative ids, never a gateway's; one counter for the process, so that a restarted worker
    // never reuses an id a probe of its predecessor may still hold in the scheduler.
    static std::atomic<int64_t> probes_made{0};
    const int64_t id = -1 - probes_made.fetch_add(1, std::memory_order_relaxed);
    auto s = submit_for(self, r, job.received, id, prompt);
    s.spec.max_tokens = 1;
    s.spec.adapter = br.adapter;
    s.spec.adapter_identity = br.adapter_identity;
    s.sampling = std::make_shared<serve::seq_sampling>(job.search.probe_sampling(), std::move(prompt));
    s.sampling->logprobs = job.search.probe_logprobs();
    st.probe_of.emplace(id, first_rid);
    job.probes.push_back(id);
    self->send(st.scheduler, std::move(s));
  }
}

// A generate with use_beam_search: a beam job per prompt, its first round submitted.
void start_beams(self_ptr self, generate_msg& m, std::vector<serve::built_request> reqs) {
  auto& st = self->state;
  const auto& r = *m.req;
  for (size_t p = 0; p < reqs.size(); ++p) {
    const int64_t first_rid = m.rid + static_cast<int64_t>(p) * r.n;
    st.ctx->metrics->observe_request_n(r.n);
    const bool include_stop = reqs[p].include_stop_str_in_output;
    // A beam ends at max_model_len as a sequence does (length): no probe may outgrow it.
    const auto room = static_cast<int32_t>(st.ctx->facts.max_model_len - static_cast<int64_t>(reqs[p].prompt.size()));
    reqs[p].max_tokens = std::min(reqs[p].max_tokens, room);
    st.beams.emplace(first_rid, beam_job{m.req, m.received, static_cast<int32_t>(p),
                                         serve::beam_request(std::move(reqs[p]), r.n, r.length_penalty, include_stop),
                                         {}, std::nullopt});
    submit_round(self, first_rid);
  }
}

// Ends beam job first_rid: its running probes are cancelled and each completion gets its done
// (why, with err); with why == stop or length, the completions are the search's best beams.
void end_beams(self_ptr self, int64_t first_rid, wire::finish_reason why, std::optional<wire::wire_error> err,
               std::vector<out_item>& items) {
  auto& st = self->state;
  auto node = st.beams.extract(first_rid);
  auto& job = node.mapped();
  for (int64_t id : job.probes)
    if (st.probe_of.erase(id)) self->send(st.scheduler, cancel_msg{id});
  const auto& r = *job.req;
  const auto& br = job.search.built();
  const bool answered = why == wire::finish_reason::stop || why == wire::finish_reason::length;
  const auto best = answered ? job.search.best() : std::vector<serve::beam>{};
  if (answered) {
    size_t most = 0;
    for (const auto& b : best) most = std::max(most, b.tokens.size());
    st.ctx->metrics->observe_max_generation_tokens(static_cast<int64_t>(most));
  }
  const auto now = clock::now();
  for (int32_t j = 0; j < r.n; ++j) {
    const int32_t i = job.prompt_index * r.n + j;
    serve::response resp(r.id, r.stream, st.ctx->facts.tok, rules_for(self, r, br, i, false),
                         static_cast<int64_t>(br.prompt.size()), job.received);
    if (job.first_scheduled) resp.set_queue_time(*job.first_scheduled);
    out_item item{first_rid + j, {}, true};
    auto reason = why;
    if (static_cast<size_t>(j) < best.size()) {
      const auto& b = best[static_cast<size_t>(j)];
      for (int32_t t : b.tokens)
        if (resp.add_token(t, now, item.bytes)) break;  // a stop string ends it there
      reason = b.stopped ? wire::finish_reason::stop : wire::finish_reason::length;
    }
    resp.finish(reason, err, now, item.bytes);
    if (st.ctx->cfg.log_requests) st.ctx->log(serve::finished_line(resp.outcome()));
    items.push_back(std::move(item));
  }
}

// A probe's update: its token's logprobs answer its beam; a probe refused or ended without a
// token ends the whole search with that reason.
void on_probe(self_ptr self, seq_update& u, std::vector<out_item>& items) {
  auto& st = self->state;
  auto owner = st.probe_of.find(u.rid);
  if (owner == st.probe_of.end()) return;  // its search already ended
  const int64_t first_rid = owner->second;
  auto& job = st.beams.at(first_rid);
  if (u.first_scheduled && !job.first_scheduled) job.first_scheduled = u.first_scheduled;
  if (u.token >= 0 && u.logprobs) {
    st.probe_of.erase(owner);
    const auto at = std::find(job.probes.begin(), job.probes.end(), u.rid);
    TROUPE_ASSERT(at != job.probes.end());
    *at = 0;  // answered: nothing to cancel
    if (!job.search.answer(static_cast<size_t>(at - job.probes.begin()), *u.logprobs)) return;
    if (job.search.done()) return end_beams(self, first_rid, wire::finish_reason::length, std::nullopt, items);
    return submit_round(self, first_rid);
  }
  if (u.rejected || u.finished) {
    auto why = u.rejected ? wire::finish_reason::error : *u.finished;
    if (why == wire::finish_reason::stop || why == wire::finish_reason::length) why = wire::finish_reason::error;
    auto err = u.error;
    if (why == wire::finish_reason::error && !err)
      err = wire::wire_error{wire::error_code::internal, "a beam search probe ended without a token", {}};
    end_beams(self, first_rid, why, err, items);
  }
}

// A cancel for a completion of a running beam search ends the whole search (each completion gets
// its done, cancelled). False when rid is not one.
bool cancel_beams(self_ptr self, int64_t rid) {
  auto& st = self->state;
  for (const auto& [first_rid, job] : st.beams)
    if (rid >= first_rid && rid < first_rid + job.req->n) {
      std::vector<out_item> items;
      end_beams(self, first_rid, wire::finish_reason::cancelled, std::nullopt, items);
      send_out(self, std::move(items));
      return true;
    }
  return false;
}

caf::behavior tokenizer_worker(self_ptr self, context_ptr ctx, int32_t index, caf::actor scheduler,
                               caf::actor gateway) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.index = index;
  st.scheduler = std::move(scheduler);
  st.gateway = std::move(gateway);
  return {
      [=](generate_msg& m) {
        answer_to_sender(self);
        auto& st = self->state;
        const auto& r = *m.req;
        if (r.embed) return submit_embed(self, m);
        if (r.rerank) return submit_rerank(self, m);
        auto b = serve::build_generates(r, st.ctx->facts);
        if (b.error) return refuse_all(self, m, *b.error);
        if (r.use_beam_search) return start_beams(self, m, std::move(b.reqs));
        // Completion j of prompt p is completion i = p * n + j, sequence rid + i (the gateway
        // reserved the ids), sampled with seed + j as vLLM's child requests; a prompt's logprobs
        // are the same for all its completions: its first reports them.
        for (size_t p = 0; p < b.reqs.size(); ++p) st.ctx->metrics->observe_request_n(r.n);  // vLLM's: per prompt
        for (size_t p = 0; p < b.reqs.size(); ++p) {
          const auto& br = b.reqs[p];
          const int64_t leader = m.rid + static_cast<int64_t>(p) * r.n;
          st.groups[leader] = {r.n, 0};
          for (int32_t j = 0; j < r.n; ++j) {
            const auto i = static_cast<int32_t>(p) * r.n + j;
            const int64_t rid = m.rid + i;
            st.group_of[rid] = leader;
            const bool prompt_logprobs = br.prompt_logprobs >= 0 && j == 0;
            auto rules = rules_for(self, r, br, i, prompt_logprobs);
            if (st.ctx->cfg.log_requests) st.ctx->log(serve::received_line(r.id, rules.index, br, r.adapter));
            st.live.emplace(rid, serve::response(r.id, r.stream, st.ctx->facts.tok, std::move(rules),
                                                 static_cast<int64_t>(br.prompt.size()), m.received));
            auto s = submit_for(self, m, i, br.prompt);
            s.spec.max_tokens = br.max_tokens;
            s.spec.stop_ids = br.stop_ids;
            s.spec.adapter = br.adapter;
            s.spec.adapter_identity = br.adapter_identity;
            if (j > 0) s.spec.prompt_leader = leader;
            auto params = br.sampling;
            if (params.has_seed) params.seed += static_cast<uint64_t>(j);
            s.sampling = std::make_shared<serve::seq_sampling>(std::move(params), br.prompt);
            s.sampling->logprobs = br.logprobs;
            s.sampling->prompt_logprobs = prompt_logprobs ? br.prompt_logprobs : -1;
            s.spec.prompt_logits = prompt_logprobs;
            self->send(st.scheduler, std::move(s));
          }
        }
      },
      // The gateway does not know the scheduler; its worker does (and hears of its restarts).
      [=](set_policy_msg& m) { return self->delegate(self->state.scheduler, std::move(m)); },
      [=](reset_prefix_cache_msg& m) { return self->delegate(self->state.scheduler, std::move(m)); },
      [=](lora_install_msg& m) { return self->delegate(self->state.scheduler, std::move(m)); },
      [=](lora_retired_msg& m) { return self->delegate(self->state.scheduler, std::move(m)); },
      [=](tokenize_msg& m) {
        answer_to_sender(self);
        const auto& r = *m.req;
        auto t = serve::prompt_ids(r, self->state.ctx->facts);
        if (t.error) return send_out(self, {error_item(m.rid, *t.error, r.id)});
        out_item it{m.rid, {}, true};
        wire::append_event_frame(it.bytes, wire::tokenize_event{r.id, std::move(t.ids)});
        send_out(self, {std::move(it)});
      },
      [=](cancel_msg& m) {
        if (!cancel_beams(self, m.rid)) self->send(self->state.scheduler, m);
      },
      [=](updates_msg& m) {
        auto& st = self->state;
        auto now = clock::now();
        std::vector<out_item> items;
        for (auto& u : m.items) {
          if (u.rid < 0) {
            on_probe(self, u, items);
            continue;
          }
          auto it = st.live.find(u.rid);
          if (it == st.live.end()) continue;  // already done (a stop string ended it)
          auto& resp = it->second;
          if (u.rejected && !resp.index()) {
            items.push_back(error_item(u.rid, *u.error, resp.client_id()));
            completion_ended(self, u.rid, 0);
            st.live.erase(it);
            continue;
          }
          // A refused completion of several (n > 1) ends with its own done, as each of them does.
          if (u.rejected) u.finished = wire::finish_reason::error;
          if (u.first_scheduled) {
            resp.set_queue_time(*u.first_scheduled);
            resp.set_cached_prompt_tokens(u.cached_prompt_tokens);
          }
          if (!u.prompt_logprobs.empty()) resp.add_prompt_logprobs(u.prompt_logprobs);
          if (u.embedding) resp.set_embedding(std::move(*u.embedding));
          out_item item{u.rid, {}, false};
          bool stopped = false;
          if (u.token >= 0) {
            try {
              stopped = resp.add_token(u.token, now, item.bytes, u.logprobs ? &*u.logprobs : nullptr);
              if (stopped) self->send(st.scheduler, stop_msg{u.rid});
            } catch (const std::exception& e) {  // an id the tokenizer cannot decode
              resp.finish(wire::finish_reason::error, wire::wire_error{wire::error_code::internal, e.what(), {}}, now,
                          item.bytes);
              self->send(st.scheduler, cancel_msg{u.rid});
            }
          }
          if (u.finished && !resp.done()) resp.finish(*u.finished, u.error, now, item.bytes);
          item.final = resp.done();
          if (item.final && st.ctx->cfg.log_requests) st.ctx->log(serve::finished_line(resp.outcome()));
          if (item.final) {
            completion_ended(self, u.rid, resp.completion_tokens());
            st.live.erase(it);
          }
          if (!item.bytes.empty() || item.final) items.push_back(std::move(item));
        }
        send_out(self, std::move(items));
      },
      [=](scheduler_changed& m) {
        // A new scheduler knows nothing of the requests in flight: end them with a reason.
        auto& st = self->state;
        st.scheduler = m.scheduler;
        auto now = clock::now();
        std::vector<out_item> items;
        const wire::wire_error lost{wire::error_code::internal,
                                    "the scheduler failed and was restarted; this request was lost", {}};
        for (auto& [rid, resp] : st.live) {
          out_item item{rid, {}, true};
          resp.finish(wire::finish_reason::error, lost, now, item.bytes);
          items.push_back(std::move(item));
        }
        st.live.clear();
        st.groups.clear();
        st.group_of.clear();
        while (!st.beams.empty()) end_beams(self, st.beams.begin()->first, wire::finish_reason::error, lost, items);
        send_out(self, std::move(items));
      },
      [=](gateway_msg& m) { self->state.gateway = m.gateway; },
      [=](drained_atom a) { self->send(self->state.gateway, a); },
  };
}

}  // namespace

caf::actor spawn_tokenizer_worker(caf::local_actor* parent, context_ptr ctx, int32_t index, caf::actor scheduler,
                                  caf::actor gateway) {
  return parent->spawn(tokenizer_worker, std::move(ctx), index, std::move(scheduler), std::move(gateway));
}

}  // namespace troupe::actors
