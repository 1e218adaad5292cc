// The supervisor: spawns the scheduler, the shard executor and the tokenizer workers, monitors
// them, and restarts one that fails, wiring the new handle to the actors that talk to it. What
// happens to the failed actor's requests is decided by those actors: an executor's are re-queued
// for recomputation (scheduler), a worker's or the scheduler's end with an `internal` error.
// With Redis it also owns the two prefix-cache actors (started once, restarted together if one
// stops; a scheduler restart keeps them).
#include "actors/supervisor.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <cstdio>

#include "actors/messages.hpp"
#include "actors/prefix_cache_actor.hpp"
#include "actors/prefix_cache_messages.hpp"
#include "actors/scheduler_actor.hpp"

namespace troupe::actors {

namespace {

struct supervisor_state {
  static inline const char* name = "troupe.supervisor";
  context_ptr ctx;
  caf::actor scheduler, executor, gateway;
  std::vector<caf::actor> workers;
  std::shared_ptr<const prefix_cache_handles> prefix;  // null without Redis
  caf::actor drain_listener;
  bool stopping = false;
  int restarts = 0;
};

using self_ptr = caf::stateful_actor<supervisor_state>*;

void start_executor(self_ptr self) {
  auto& st = self->state;
  st.executor = spawn_shard_executor(self, st.ctx);
  self->monitor(st.executor);
}

void start_prefix_cache(self_ptr self) {
  auto& st = self->state;
  if (!st.ctx->prefix.remote) return;
  const auto& p = st.ctx->prefix;
  prefix_cache_config c;
  c.redis = p.redis;
  c.remote = p.remote_opts;
  c.identity = p.identity;
  c.layout = p.layout;
  c.max_publish_queue_bytes = p.max_publish_queue_bytes;
  st.prefix = std::make_shared<const prefix_cache_handles>(
      spawn_prefix_cache(self, c, st.ctx->prefix_cost, st.ctx->prefix_metrics));
  self->monitor(st.prefix->lookup);
  self->monitor(st.prefix->publisher);
}

void stop_prefix_cache(self_ptr self, caf::exit_reason why) {
  auto& st = self->state;
  if (!st.prefix) return;
  for (const auto& a : {st.prefix->lookup, st.prefix->publisher}) {
    self->demonitor(a);
    self->send_exit(a, why);
  }
  st.prefix = nullptr;
}

void start_scheduler(self_ptr self) {
  auto& st = self->state;
  st.scheduler = spawn_scheduler(self, st.ctx, st.workers, st.executor, self, st.prefix);
  self->monitor(st.scheduler);
  for (auto& w : st.workers) self->send(w, scheduler_changed{st.scheduler});
}

caf::actor start_worker(self_ptr self, int32_t i) {
  auto& st = self->state;
  auto w = spawn_tokenizer_worker(self, st.ctx, i, st.scheduler, st.gateway);
  self->monitor(w);
  return w;
}

void on_down(self_ptr self, const caf::down_msg& m) {
  auto& st = self->state;
  if (st.stopping) return;
  auto why = to_string(m.reason);
  ++st.restarts;
  if (m.source == st.executor.address()) {
    std::fprintf(stderr, "troupe serve: supervisor: shard executor stopped (%s); restarting it\n", why.c_str());
    start_executor(self);
    self->send(st.scheduler, executor_changed{st.executor});
    return;
  }
  if (st.prefix && (m.source == st.prefix->lookup.address() || m.source == st.prefix->publisher.address())) {
    std::fprintf(stderr, "troupe serve: supervisor: a prefix-cache actor stopped (%s); restarting both\n",
                 why.c_str());
    stop_prefix_cache(self, caf::exit_reason::user_shutdown);
    start_prefix_cache(self);
    self->send(st.scheduler, prefix_changed{st.prefix});
    return;
  }
  if (m.source == st.scheduler.address()) {
    std::fprintf(stderr, "troupe serve: supervisor: scheduler stopped (%s); restarting it, its requests fail\n",
                 why.c_str());
    start_scheduler(self);
    return;
  }
  for (size_t i = 0; i < st.workers.size(); ++i) {
    if (m.source != st.workers[i].address()) continue;
    std::fprintf(stderr, "troupe serve: supervisor: tokenizer worker %zu stopped (%s); restarting it\n", i,
                 why.c_str());
    st.workers[i] = start_worker(self, static_cast<int32_t>(i));
    self->send(st.scheduler, worker_changed{static_cast<int32_t>(i), st.workers[i]});
    if (st.gateway) self->send(st.gateway, worker_changed{static_cast<int32_t>(i), st.workers[i]});
    return;
  }
}

caf::behavior supervisor(self_ptr self, context_ptr ctx) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  start_prefix_cache(self);
  start_executor(self);
  for (int32_t i = 0; i < st.ctx->cfg.tokenizer_workers; ++i) st.workers.push_back(start_worker(self, i));
  start_scheduler(self);
  self->set_down_handler([=](caf::down_msg& m) { on_down(self, m); });
  self->set_exit_handler([=](caf::exit_msg& m) {
    // Shutting down: take the children along (they are monitored, not linked).
    auto& st = self->state;
    st.stopping = true;
    for (auto& w : st.workers) self->send_exit(w, caf::exit_reason::user_shutdown);
    self->send_exit(st.scheduler, caf::exit_reason::user_shutdown);
    self->send_exit(st.executor, caf::exit_reason::user_shutdown);
    stop_prefix_cache(self, caf::exit_reason::user_shutdown);
    self->quit(m.reason);
  });
  return {
      [=](caf::get_atom) -> workers_msg { return workers_msg{self->state.workers}; },
      [=](gateway_msg& m) {
        self->state.gateway = m.gateway;
        for (auto& w : self->state.workers) self->send(w, m);
      },
      [=](drain_atom, int64_t grace_ms) {
        auto& st = self->state;
        st.drain_listener = caf::actor_cast<caf::actor>(self->current_sender());
        if (st.gateway) self->send(st.gateway, drain_atom::value);
        self->send(st.scheduler, drain_atom::value, grace_ms);
      },
      [=](drained_atom) {  // from the gateway: every request has ended and been answered
        auto& st = self->state;
        if (st.drain_listener) self->send(st.drain_listener, drained_atom::value);
      },
      [=](kill_exec_atom) { self->send_exit(self->state.executor, caf::exit_reason::kill); },
      [=](kill_sched_atom) { self->send_exit(self->state.scheduler, caf::exit_reason::kill); },
      [=](kill_worker_atom, int32_t i) {
        self->send_exit(self->state.workers.at(static_cast<size_t>(i)), caf::exit_reason::kill);
      },
      [=](kill_prefix_atom) {
        if (self->state.prefix) self->send_exit(self->state.prefix->lookup, caf::exit_reason::kill);
      },
      [=](restarts_atom) -> int { return self->state.restarts; },
  };
}

}  // namespace

caf::actor spawn_supervisor(caf::actor_system& sys, context_ptr ctx) { return sys.spawn(supervisor, std::move(ctx)); }

}  // namespace troupe::actors
