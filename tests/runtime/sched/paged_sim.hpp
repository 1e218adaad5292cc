// A simulated paged KV pool driven by the scheduler: each slot records which token's K/V it
// holds, every step checks that the context a sequence attends to is exactly its own tokens (a
// wrongly shared, evicted-while-used, overwritten or never-rewritten block fails at once), and
// outputs come from a stand-in model reading that pool, so they equal a plain reference only if
// the scheduler's bookkeeping was right. Drafts (speculative decoding) are verified as the
// executor does. Used by the scheduler's prefix-caching and speculative-decoding tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "runtime/sched/scheduler.hpp"

namespace troupe::sched::test {

// A deterministic stand-in for the model: the next token is a function of the whole context.
inline int32_t fake_model(std::span<const int32_t> context) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % 1000) + 1000;
}

using model_fn = int32_t (*)(std::span<const int32_t>);

// What a sequence must output, computed without any scheduler or cache.
inline std::vector<int32_t> reference(std::vector<int32_t> tokens, int32_t max_tokens, model_fn model = fake_model) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < max_tokens; ++i) {
    out.push_back(model(tokens));
    tokens.push_back(out.back());
  }
  return out;
}

inline std::vector<int32_t> tokens_from(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

struct paged_sim {
  scheduler s;
  int32_t bs;
  model_fn model = fake_model;
  int64_t drafted = 0, accepted = 0;  // draft tokens planned, and confirmed by the model
  std::vector<int32_t> pool;  // the token whose K/V each slot holds (-1: never written)
  std::map<int64_t, std::vector<int32_t>> prompts, out;
  std::map<int64_t, int32_t> max_tokens, cached;
  std::map<int64_t, int32_t> adapter_of;  // the adapter slot the step carried for each sequence
  std::vector<prefix::kv_save> saves;
  std::vector<prefix::kv_load> loads;

  paged_sim(sched_config cfg, int32_t blocks, int32_t block_size)
      : s(cfg, blocks, block_size), bs(block_size), pool(static_cast<size_t>(blocks * block_size), -1) {}

  // adapter >= 0: a LoRA adapter slot, with identity "lora<slot>" (its blocks are its own);
  // salt: the request's cache_salt.
  void add(int64_t id, std::vector<int32_t> prompt, int32_t n_out, bool prompt_logits = false, int64_t leader = -1,
           int32_t adapter = -1, std::string salt = {}) {
    request_spec r;
    r.seq_id = id;
    r.cache_salt = std::move(salt);
    r.adapter = adapter;
    if (adapter >= 0) r.adapter_identity = "lora" + std::to_string(adapter);
    r.prompt_leader = leader;
    r.prompt_logits = prompt_logits;
    r.prompt = prompt;
    r.max_tokens = n_out;
    prompts[id] = prompt;
    max_tokens[id] = n_out;
    auto a = s.add(std::move(r));
    BOOST_REQUIRE_MESSAGE(a.status == admit_status::ok, a.message);
  }

  int32_t& slot(std::span<const int32_t> table, int32_t pos) {
    return pool[static_cast<size_t>(table[pos / bs] * bs + pos % bs)];
  }

  // One step; returns "id:start+n[*]" per planned sequence, like the scheduler tests.
  std::string step() {
    auto plan = s.schedule();
    s.check_invariants();
    for (const auto& l : plan.kv_loads) {
      BOOST_REQUIRE(l.payload.bytes.size() == static_cast<size_t>(bs) * 4);
      std::memcpy(&pool[static_cast<size_t>(l.block * bs)], l.payload.bytes.data(), l.payload.bytes.size());
      loads.push_back(l);
    }
    std::ostringstream d;
    std::vector<int32_t> sampled, counts;
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const auto& e = plan.seqs[i];
      const auto& b = plan.batch[i];
      d << e.seq_id << ":" << e.start_pos << "+" << e.num_tokens << (e.sample ? "*" : "") << " ";
      if (e.first_scheduled) cached[e.seq_id] = e.num_cached_tokens;
      adapter_of[e.seq_id] = b.adapter;
      auto known = s.tokens(e.seq_id);
      for (int32_t p = 0; p < e.start_pos; ++p)
        BOOST_REQUIRE_MESSAGE(slot(b.block_table, p) == known[static_cast<size_t>(p)],
                              "seq " << e.seq_id << " position " << p << " holds " << slot(b.block_table, p)
                                     << ", expected " << known[static_cast<size_t>(p)]);
      for (int32_t t = 0; t < e.num_tokens; ++t) slot(b.block_table, e.start_pos + t) = b.tokens[static_cast<size_t>(t)];
      if (e.sample) {
        // Without drafts the chunk's last row; with drafts row j (after the last token and drafts
        // 0..j-1), sampled while the drafts before it held, as the executor does.
        const int32_t first_row = e.num_draft > 0 ? 0 : e.num_tokens - 1;
        int32_t n = 0;
        for (int32_t r = first_row; r < e.num_tokens; ++r) {
          std::vector<int32_t> context;
          for (int32_t p = 0; p <= e.start_pos + r; ++p) context.push_back(slot(b.block_table, p));
          sampled.push_back(model(context));
          ++n;
          if (e.num_draft == 0 || r >= e.num_draft || sampled.back() != b.tokens[static_cast<size_t>(r + 1)]) break;
        }
        counts.push_back(n);
        drafted += e.num_draft;
        accepted += n - 1;
      }
    }
    for (const auto& sv : plan.kv_saves) {  // after the step: the block holds what its meta says
      for (int32_t t = 0; t < bs; ++t)
        BOOST_REQUIRE(pool[static_cast<size_t>(sv.block * bs + t)] == sv.meta.tokens[static_cast<size_t>(t)]);
      saves.push_back(sv);
    }
    for (const auto& ev : s.update(plan, sampled, counts))
      out[ev.seq_id].insert(out[ev.seq_id].end(), ev.tokens.begin(), ev.tokens.end());
    s.check_invariants();
    return d.str();
  }

  void run(int max_steps = 1000) {
    for (int i = 0; i < max_steps && !s.idle(); ++i) step();
    BOOST_REQUIRE(s.idle());
  }

  void check_outputs() {
    for (const auto& [id, p] : prompts)
      BOOST_TEST(out[id] == reference(p, max_tokens[id], model), boost::test_tools::per_element());
  }

  std::vector<block_id> table_of(int64_t id) const {
    auto t = s.allocator().block_table(id);
    return {t.begin(), t.end()};
  }
  const prefix::prefix_cache& pc() const { return *s.prefix_cache(); }
};

}  // namespace troupe::sched::test
