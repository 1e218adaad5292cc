// The shard executor: a detached actor (its own thread) owning the KV pool and the model runner
// of one device; it runs each step job it receives and replies with the sampled ids. On the CPU a
// tensor-parallel group (model.tensor_parallel_size) is the executor's runner: one thread per
// rank, meeting in shared memory twice a layer (runtime/engine/tensor_parallel_runner.hpp); with
// model.device cuda the CUDA runner (runtime/serve/cuda/cuda_step_backend.hpp).
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <cstdio>
#include <string>

#include "actors/messages.hpp"
#include "actors/scheduler_actor.hpp"

namespace troupe::actors {

namespace {

caf::behavior shard_executor(caf::event_based_actor* self, context_ptr ctx) {
  (void)self;
  // The executor made at start-up, or a fresh one after a restart (executor_source). A restart
  // whose backend cannot be made (the device lost, its memory taken) leaves an executor that fails
  // every step with the reason: requests end with an error naming it instead of waiting on a
  // restart loop.
  std::shared_ptr<serve::batch_executor> ex;
  std::string broken;
  try {
    ex = ctx->executors->take();
  } catch (const std::exception& e) {
    broken = std::string("the shard executor has no engine: restarting it failed: ") + e.what();
    std::fprintf(stderr, "troupe serve: %s\n", broken.c_str());
  }
  return {
      [=](step_msg& m) -> step_done_msg {
        if (!ex) {
          auto out = std::make_shared<serve::step_outcome>();
          out->step_error = broken;
          return step_done_msg{std::move(out)};
        }
        // run() catches engine and sampler errors itself; nothing escapes the mailbox.
        return step_done_msg{std::make_shared<serve::step_outcome>(ex->run(*m.job))};
      },
      // Between steps: an adapter loaded while the server runs, or a drained slot emptied.
      [=](lora_install_msg& m) -> lora_install_reply {
        if (!ex) return {false, broken};
        try {
          ex->set_adapter(m.slot, std::move(m.adapter));
          return {true, {}};
        } catch (const std::exception& e) {
          return {false, e.what()};
        }
      },
  };
}

}  // namespace

caf::actor spawn_shard_executor(caf::local_actor* parent, context_ptr ctx) {
  return parent->spawn<caf::detached>(shard_executor, std::move(ctx));
}

}  // namespace troupe::actors
