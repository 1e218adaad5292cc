// A serving replica without actors: the scheduler and a batch executor run step after step until
// every request is done, greedy, with the outputs, cached prompt tokens and published blocks kept
// (and, with `remote`, prefix caching through a store). What the serving tests of the engine and the
// prefix cache drive, on the CPU engine or any step backend (the CUDA runner's tests).
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "runtime/prefix/remote_cache.hpp"
#include "runtime/serve/batch_executor.hpp"

namespace troupe::testing {

struct request {
  std::vector<int32_t> prompt;
  int32_t max_tokens;
};

struct replica {
  sched::scheduler s;
  serve::batch_executor ex;
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, int32_t> cached;
  std::vector<prefix::saved_block> saved;
  std::unique_ptr<prefix::remote_cache> remote;

  replica(std::shared_ptr<const checkpoint> ck, sched::sched_config cfg, int32_t blocks, int32_t bs)
      : s(cfg, blocks, bs), ex(std::move(ck), blocks, bs) {}
  replica(std::unique_ptr<serve::step_backend> backend, sched::sched_config cfg, int32_t bs)
      : s(cfg, backend->num_blocks(), bs), ex(std::move(backend)) {}

  void add(int64_t id, const request& r) {
    sched::request_spec spec;
    spec.seq_id = id;
    spec.prompt = r.prompt;
    spec.max_tokens = r.max_tokens;
    BOOST_REQUIRE(s.add(spec).status == sched::admit_status::ok);
    samplers[id] = std::make_shared<serve::seq_sampling>(greedy(), r.prompt);
  }

  static sampling_params greedy() {
    sampling_params p;
    p.temperature = 0;
    p.ignore_eos = true;
    return p;
  }

  void run() {
    for (int guard = 0; guard < 100000 && !s.idle(); ++guard) {
      for (auto& q : s.take_remote_lookups()) {
        prefix::remote_blocks found;
        if (remote) found = remote->fetch(q, prefix::store_clock::now() + std::chrono::seconds(10)).blocks;
        s.resolve_remote(q.seq_id, std::move(found));
      }
      serve::step_job job;
      job.plan = s.schedule();
      s.check_invariants();
      for (const auto& e : job.plan.seqs) {
        if (e.first_scheduled) cached[e.seq_id] = e.num_cached_tokens;
        if (e.sample) job.samplers.push_back(samplers.at(e.seq_id));
      }
      auto outcome = ex.run(job);
      BOOST_REQUIRE_MESSAGE(outcome.step_error.empty(), outcome.step_error);
      if (remote && !outcome.saved.empty())
        remote->publish(outcome.saved, prefix::store_clock::now() + std::chrono::seconds(10));
      for (auto& b : outcome.saved) saved.push_back(std::move(b));
      for (const auto& ev : s.update(job.plan, outcome.sampled))
        out[ev.seq_id].insert(out[ev.seq_id].end(), ev.tokens.begin(), ev.tokens.end());
    }
    BOOST_REQUIRE(s.idle());
  }

  std::map<int64_t, std::shared_ptr<serve::seq_sampling>> samplers;
};

}  // namespace troupe::testing
