// A scheduler driven by a simulated model whose next token is a function of the sequence's
// whole history, so every request's output is known in advance whatever the schedule
// (preempted and recomputed, or reordered by a policy): "no request lost" is checkable exactly.
#pragma once

#include <boost/test/unit_test.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/sched/scheduler.hpp"

namespace host_test {

using namespace troupe::sched;

inline int32_t fake_model(int64_t seq, std::span<const int32_t> history) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(seq);
  for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % 1000) + 1000;
}

inline request_spec req(int64_t id, int32_t prompt_len, int32_t max_tokens, int32_t priority = 0,
                        std::string tenant = "") {
  request_spec r;
  r.seq_id = id;
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(static_cast<int32_t>(10 + i + 100 * id));
  r.max_tokens = max_tokens;
  r.priority = priority;
  r.tenant = std::move(tenant);
  return r;
}

// What request `r` must produce: its prompt run alone through the fake model.
inline std::vector<int32_t> expected_output(const request_spec& r) {
  std::vector<int32_t> hist = r.prompt, out;
  for (int32_t i = 0; i < r.max_tokens; ++i) {
    int32_t t = fake_model(r.seq_id, hist);
    hist.push_back(t);
    out.push_back(t);
  }
  return out;
}

struct sim {
  scheduler s;
  std::map<int64_t, request_spec> specs;
  std::map<int64_t, std::vector<int32_t>> out;
  std::map<int64_t, finish_reason> done;
  std::vector<int64_t> first_scheduled;  // in order
  int64_t preemptions = 0;

  sim(sched_config cfg, int32_t blocks, int32_t block_size, std::unique_ptr<policy> p)
      : s(cfg, blocks, block_size, std::move(p)) {}

  void add(request_spec r) {
    specs[r.seq_id] = r;
    auto a = s.add(std::move(r));
    BOOST_REQUIRE_MESSAGE(a.status == admit_status::ok, a.message);
  }

  // One step; returns "!victim ... id ..." (preempted, then planned ids).
  std::string step() {
    auto plan = s.schedule();
    s.check_invariants();
    std::ostringstream d;
    for (int64_t p : plan.preempted) d << "!" << p << " ";
    preemptions += static_cast<int64_t>(plan.preempted.size());
    std::vector<int32_t> sampled;
    for (const auto& e : plan.seqs) {
      d << e.seq_id << " ";
      if (e.first_scheduled) first_scheduled.push_back(e.seq_id);
      if (e.sample)
        sampled.push_back(fake_model(e.seq_id, s.tokens(e.seq_id).first(static_cast<size_t>(e.start_pos + e.num_tokens))));
    }
    for (const auto& ev : s.update(plan, sampled)) {
      out[ev.seq_id].insert(out[ev.seq_id].end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) done[ev.seq_id] = *ev.finished;
    }
    s.check_invariants();
    auto str = d.str();
    if (!str.empty()) str.pop_back();
    return str;
  }

  void run(int max_steps = 5000) {
    for (int i = 0; i < max_steps && !s.idle(); ++i) step();
    BOOST_REQUIRE_MESSAGE(s.idle(), "not idle after " << max_steps << " steps");
  }

  // Every request added finished by length with exactly the tokens it would produce alone.
  void check_all_served() {
    BOOST_TEST(done.size() == specs.size());
    for (const auto& [id, r] : specs) {
      BOOST_TEST_CONTEXT("request " << id) {
        BOOST_TEST((done.count(id) && done.at(id) == finish_reason::length));
        BOOST_TEST(out[id] == expected_output(r));
      }
    }
  }
};

}  // namespace host_test
