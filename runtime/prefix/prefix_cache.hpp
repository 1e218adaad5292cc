// The scheduler's side of prefix caching, as plain data in / data out: hashes each sequence's
// full blocks, finds the longest cached chain at admission (local blocks, then blocks fetched
// from the shared store), registers blocks as they fill, and says which blocks the executor must
// load before a step and save after it. The scheduler owns it and the block allocator; the
// allocator's free list is the LRU order of evictable cached blocks (see prefix_index.hpp).
// Invariant: a registered block is full, its K/V are in the pool, and it is never written again
// while registered (only fresh blocks, claimed off the free list, receive new K/V).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/kv/block_allocator.hpp"
#include "runtime/prefix/block_codec.hpp"
#include "runtime/prefix/block_hash.hpp"
#include "runtime/prefix/kv_store.hpp"
#include "runtime/prefix/prefix_index.hpp"

namespace troupe::prefix {

struct prefix_options {
  // A shared store is configured: sequences whose prompt extends past the local hit wait for a
  // remote lookup (take_remote_lookups / resolve_remote) before admission, and the blocks each
  // step fills are listed for publishing (step saves).
  bool remote = false;
  // Fetched blocks wait in memory from their look-up to their sequence's admission: look-ups stop
  // being issued (the sequence then recomputes) while the blocks asked for and held would pass
  // max_pending_remote_bytes. remote_block_bytes is one block's payload (0: no limit).
  size_t remote_block_bytes = 0;
  size_t max_pending_remote_bytes = size_t{1} << 30;
};

// What to look up in the shared store for one sequence: its full blocks from first_block on.
struct remote_lookup {
  int64_t seq_id = 0;
  size_t first_block = 0;
  std::vector<block_meta> blocks;
};

// The answer: validated payloads of blocks first_block, first_block + 1, ... (may be empty).
struct remote_blocks {
  size_t first_block = 0;
  std::vector<stored_value> payloads;
};

// Executor work attached to a step: load fetched K/V into a fresh block before the forward pass,
// and copy a block the step fills out of the pool after it (for publishing).
struct kv_load {
  block_id block = 0;
  stored_value payload;
};
struct kv_save {
  block_id block = 0;
  block_meta meta;
};
struct saved_block {
  block_meta meta;
  std::string payload;
};

struct prefix_stats {
  int64_t num_queries = 0;        // sequences looked up at their first admission
  int64_t num_hits = 0;           // ... that reused at least one block
  int64_t query_tokens = 0;       // their prompt tokens
  int64_t hit_tokens = 0;         // ... found cached (local + remote)
  int64_t remote_hit_tokens = 0;  // ... of which loaded from the shared store
  int64_t num_remote_lookups = 0; // lookups handed out
  int64_t num_remote_skipped = 0; // lookups not issued: max_pending_remote_bytes reached
  int64_t evicted_blocks = 0;     // cached blocks reused for new content
  int32_t cached_blocks = 0;      // blocks holding a registered hash now
};

class prefix_cache {
 public:
  prefix_cache(const cache_identity& id, int32_t num_blocks, prefix_options opts = {});

  const block_hash& root() const noexcept { return root_; }
  int32_t block_size() const noexcept { return block_size_; }
  const prefix_options& options() const noexcept { return opts_; }

  // A sequence arrives. With opts.remote, and full prompt blocks past the local hit, it gets a
  // remote lookup and waits for resolve_remote(). reuse = false: it computes its whole prompt
  // (match() finds nothing, no lookup) but still publishes its blocks for others (a request
  // that wants every prompt row's logits, as vLLM skips the cache for prompt_logprobs).
  // adapter: a LoRA adapter's identity ("": the base model), which roots the sequence's hash chain
  // (root_hash of the identity with that adapter): its blocks match only the same adapter's.
  // cache_salt (vLLM's): salts that root further (salted_root): its blocks match only sequences
  // with the same adapter and the same salt. Not memoised: one SHA-256 per salted sequence.
  void add(int64_t seq, std::span<const int32_t> prompt, bool reuse = true, std::string_view adapter = {},
           std::string_view cache_salt = {});
  bool waiting_remote(int64_t seq) const;
  std::vector<remote_lookup> take_remote_lookups();
  // Ends a sequence's wait (payloads may be empty: nothing found, too slow, store down). A
  // sequence no longer known or not waiting is ignored (the answer came after a cancel).
  void resolve_remote(int64_t seq, remote_blocks found);

  struct hit {
    std::vector<block_id> local;        // cached blocks to share, in chain order
    std::vector<stored_value> remote;   // then payloads for that many fresh blocks
    int32_t num_tokens(int32_t block_size) const {
      return static_cast<int32_t>(local.size() + remote.size()) * block_size;
    }
  };
  // The reusable prefix of a sequence whose known tokens are `tokens`, in whole blocks and
  // leaving at least the last token to compute (its logits start the output).
  hit match(int64_t seq, std::span<const int32_t> tokens);
  // The sequence was admitted with `h`; `table` is its new block table (h.local first). Fresh
  // blocks lose their old hashes; remote payloads become loads for its first step.
  void admitted(int64_t seq, const hit& h, std::span<const block_id> table, int32_t num_prompt_tokens);
  // Fresh blocks handed out to grow a table: their old hashes are forgotten.
  void claimed(std::span<const block_id> fresh);
  // A step computes tokens [start, start + n) of seq: moves its pending loads to `loads` and,
  // with opts.remote, lists the blocks the chunk fills in `saves`.
  void plan(int64_t seq, std::span<const int32_t> tokens, std::span<const block_id> table, int32_t start,
            int32_t n, std::vector<kv_load>& loads, std::vector<kv_save>& saves);
  // After the step: tokens [0, num_computed) have K/V in `table`; registers the full blocks.
  void computed(int64_t seq, std::span<const int32_t> tokens, std::span<const block_id> table,
                int32_t num_computed);
  // The sequence lost its blocks (preemption): the next admission matches again.
  void preempted(int64_t seq);
  // The pool's contents are lost (its executor failed): forget every cached block. Only valid
  // when no sequence holds blocks (all were preempted).
  void forget_all();
  void removed(int64_t seq);

  // Prompt tokens reused at the sequence's first admission (local + remote), and of them remote.
  int32_t num_cached_tokens(int64_t seq) const;
  int32_t num_remote_tokens(int64_t seq) const;
  // What a scheduling policy sees as the sequence's cached prefix (seq_view::num_cached_tokens):
  // before its first admission, the prompt tokens it would reuse now (local chain, then resolved
  // remote blocks that continue it) for `num_tokens` known tokens; after it, num_cached_tokens.
  // Const: asking changes no LRU order.
  int32_t cached_prefix_tokens(int64_t seq, size_t num_tokens) const;
  prefix_stats stats() const;
  const prefix_index& index() const noexcept { return index_; }
  // Payload bytes asked for or held by sequences between look-up and admission.
  size_t pending_remote_bytes() const noexcept { return pending_remote_bytes_; }
  // Index consistency; pending_remote_bytes equals the sum of what sequences reserve.
  void check_invariants() const;

 private:
  struct seq_state {
    std::vector<block_hash> hashes;  // full blocks of the known tokens, chained from root
    block_hash root;                 // root_, or the root of its adapter
    size_t registered = 0;           // leading blocks already handed to the index (or duplicates)
    bool waiting_remote = false;
    bool admitted_once = false;
    bool reuse = true;
    remote_blocks remote;            // resolved, not yet admitted
    std::vector<kv_load> pending_loads;
    int32_t cached_tokens = 0;
    int32_t remote_tokens = 0;
    size_t reserved_bytes = 0;       // counted in pending_remote_bytes_
  };
  void release(seq_state& s);
  seq_state& state(int64_t seq);
  void extend(seq_state& s, std::span<const int32_t> tokens);
  const block_hash& adapter_root(std::string_view adapter);  // memoised: one SHA-256 per adapter
  block_meta meta(const seq_state& s, std::span<const int32_t> tokens, size_t b) const;

  cache_identity identity_;
  block_hash root_;
  std::unordered_map<std::string, block_hash> adapter_roots_;
  int32_t block_size_;
  prefix_options opts_;
  prefix_index index_;
  std::unordered_map<int64_t, seq_state> seqs_;
  std::vector<remote_lookup> lookups_;
  size_t pending_remote_bytes_ = 0;
  prefix_stats stats_;
};

}  // namespace troupe::prefix
