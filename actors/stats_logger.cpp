#include "actors/stats_logger.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <chrono>

#include "actors/messages.hpp"
#include "runtime/serve/stats_log.hpp"

namespace troupe::actors {

namespace {

struct stats_state {
  static inline const char* name = "troupe.stats";
  serve::stats_log log;
};

caf::behavior stats_logger(caf::stateful_actor<stats_state>* self, context_ptr ctx,
                           std::function<void(const std::string&)> sink) {
  const auto every = std::chrono::milliseconds(ctx->cfg.log_stats_interval_ms);
  const auto start = std::chrono::steady_clock::now();
  auto sample = [=] {
    auto s = ctx->metrics->stats();
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (ctx->prefix_metrics) {
      const auto p = ctx->prefix_metrics->local();
      s.prefix_caching = true;
      s.prefix_query_tokens = p.query_tokens;
      s.prefix_hit_tokens = p.hit_tokens;
    }
    return s;
  };
  self->state.log.next(sample());  // the first interval starts now
  self->delayed_send(self, every, tick_atom::value);
  return {
      [=](tick_atom) {
        if (auto line = self->state.log.next(sample())) sink(*line);
        self->delayed_send(self, every, tick_atom::value);
      },
  };
}

}  // namespace

caf::actor spawn_stats_logger(caf::actor_system& sys, context_ptr ctx, std::function<void(const std::string&)> sink) {
  return sys.spawn(stats_logger, std::move(ctx), std::move(sink));
}

}  // namespace troupe::actors
