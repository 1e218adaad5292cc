#include "runtime/grammar/matcher.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "runtime/core/error.hpp"

namespace troupe::grammar {

namespace {

// Past this many states the memo tables are dropped and rebuilt from the current state: a
// grammar that keeps making new states (counters, long literals) must not grow without end.
constexpr size_t kMaxStates = 16384;
constexpr size_t kMaxMasks = 128;  // cached masks (each is id_limit bits: ~19 KB for Qwen3)
constexpr int32_t kDead = -1;
constexpr int32_t kUnknown = -2;

struct vector_hash {
  size_t operator()(const std::vector<int32_t>& v) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

}  // namespace

struct matcher::impl {
  // A stack frame: the next element to match (for the top) or the return position (below it).
  struct frame {
    uint32_t pos;
    int32_t parent;  // -1: the bottom of the stack
  };
  // A set of stacks, by their top frames (sorted), and whether the input so far is complete.
  struct state {
    std::vector<int32_t> tops;
    bool complete = false;
    std::unique_ptr<int32_t[]> next;  // 256 transitions, kUnknown until computed
  };

  std::shared_ptr<const grammar> g;
  std::shared_ptr<const token_table> tokens;
  std::vector<int32_t> end_ids;
  std::vector<frame> frames;
  std::unordered_map<uint64_t, int32_t> frame_ids;
  std::vector<state> states;
  std::unordered_map<std::vector<int32_t>, int32_t, vector_hash> state_ids;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks;
  std::vector<uint64_t> no_tokens;  // the mask once finished
  int32_t current = kDead;
  bool finished = false;

  // Scratch of one transition.
  std::vector<std::pair<uint32_t, int32_t>> work;
  std::unordered_set<uint64_t> seen;
  std::vector<int32_t> tops;
  std::vector<int32_t> key;

  static uint64_t pack(uint32_t pos, int32_t parent) {
    return (uint64_t{pos} << 32) | static_cast<uint32_t>(parent);
  }

  int32_t intern_frame(uint32_t pos, int32_t parent) {
    auto [it, fresh] = frame_ids.emplace(pack(pos, parent), static_cast<int32_t>(frames.size()));
    if (fresh) frames.push_back({pos, parent});
    return it->second;
  }

  // Runs the queued (position, parent) pairs until every stack's top is a byte element: rule
  // references push their alternatives, ends pop. A reference followed by the end of its
  // alternative returns straight to the caller's caller (no frame), so right recursion such as
  // R ::= x R keeps the stack flat.
  void close(bool& complete) {
    while (!work.empty()) {
      auto [pos, parent] = work.back();
      work.pop_back();
      if (!seen.insert(pack(pos, parent)).second) continue;
      const element& e = g->elements[pos];
      if (e.k == element::kind::bytes) {
        tops.push_back(intern_frame(pos, parent));
      } else if (e.k == element::kind::end) {
        if (parent < 0) {
          complete = true;
        } else {
          const frame f = frames[static_cast<size_t>(parent)];
          work.push_back({f.pos, f.parent});
        }
      } else {
        const int32_t ret = g->elements[pos + 1].k == element::kind::end ? parent : intern_frame(pos + 1, parent);
        for (uint32_t start : g->rules[e.index]) work.push_back({start, ret});
      }
    }
  }

  int32_t intern_state(bool complete) {
    std::sort(tops.begin(), tops.end());
    tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
    if (tops.empty() && !complete) return kDead;
    key = tops;
    if (complete) key.push_back(std::numeric_limits<int32_t>::min());
    auto [it, fresh] = state_ids.emplace(key, static_cast<int32_t>(states.size()));
    if (fresh) {
      state s;
      s.tops = tops;
      s.complete = complete;
      states.push_back(std::move(s));
    }
    return it->second;
  }

  int32_t start_state() {
    work.clear();
    seen.clear();
    tops.clear();
    for (uint32_t start : g->rules[g->root]) work.push_back({start, -1});
    bool complete = false;
    close(complete);
    return intern_state(complete);
  }

  int32_t step(int32_t s, uint8_t b) {
    state& st = states[static_cast<size_t>(s)];
    if (!st.next) {
      st.next = std::make_unique<int32_t[]>(256);
      std::fill_n(st.next.get(), 256, kUnknown);
    }
    if (int32_t known = st.next[b]; known != kUnknown) return known;
    work.clear();
    seen.clear();
    tops.clear();
    for (int32_t f : st.tops) {
      const frame fr = frames[static_cast<size_t>(f)];
      if (g->sets[g->elements[fr.pos].index].test(b)) work.push_back({fr.pos + 1, fr.parent});
    }
    bool complete = false;
    close(complete);
    const int32_t to = intern_state(complete);
    states[static_cast<size_t>(s)].next[b] = to;  // states may have moved
    return to;
  }

  int32_t walk(int32_t s, std::string_view bytes) {
    for (char c : bytes) {
      s = step(s, static_cast<uint8_t>(c));
      if (s == kDead) return kDead;
    }
    return s;
  }

  // Drops every memo but the current state (see kMaxStates).
  void maybe_reset() {
    if (states.size() <= kMaxStates) return;
    std::vector<int32_t> keep = states[static_cast<size_t>(current)].tops;
    const bool complete = states[static_cast<size_t>(current)].complete;
    // Frames stay (the current tops point into them); states and masks go.
    states.clear();
    state_ids.clear();
    masks.clear();
    tops = std::move(keep);
    current = intern_state(complete);
  }

  bool is_end_id(int32_t id) const { return std::find(end_ids.begin(), end_ids.end(), id) != end_ids.end(); }

  const std::vector<uint64_t>& mask_of(int32_t s) {
    if (auto it = masks.find(s); it != masks.end()) return it->second;
    if (masks.size() >= kMaxMasks) masks.clear();
    std::vector<uint64_t> bits((tokens->id_limit() + 63) / 64, 0);
    const auto& nodes = tokens->nodes();
    // Depth-first over the trie, carrying the state before each node's byte; a dead state
    // prunes every token below it.
    std::vector<std::pair<uint32_t, int32_t>> stack;
    for (uint32_t c = 0; c < nodes[0].num_children; ++c) stack.push_back({nodes[0].first_child + c, s});
    while (!stack.empty()) {
      auto [n, from] = stack.back();
      stack.pop_back();
      const token_table::node& nd = nodes[n];
      const int32_t to = step(from, nd.byte);
      if (to == kDead) continue;
      if (nd.token >= 0) bits[static_cast<size_t>(nd.token) / 64] |= uint64_t{1} << (nd.token % 64);
      for (uint32_t c = 0; c < nd.num_children; ++c) stack.push_back({nd.first_child + c, to});
    }
    if (states[static_cast<size_t>(s)].complete)
      for (int32_t id : end_ids)
        if (id >= 0 && static_cast<size_t>(id) < tokens->id_limit())
          bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    return masks.emplace(s, std::move(bits)).first->second;
  }
};

matcher::matcher(std::shared_ptr<const grammar> g, std::shared_ptr<const token_table> tokens,
                 std::vector<int32_t> end_ids)
    : impl_(std::make_unique<impl>()) {
  TROUPE_ASSERT(g && tokens);
  impl_->g = std::move(g);
  impl_->tokens = std::move(tokens);
  impl_->end_ids = std::move(end_ids);
  impl_->no_tokens.assign((impl_->tokens->id_limit() + 63) / 64, 0);
  impl_->current = impl_->start_state();
  // A grammar whose root matches nothing at all cannot be: every rule has an alternative, and a
  // class that matches nothing is refused by the parser.
  TROUPE_ASSERT(impl_->current != kDead);
}

matcher::~matcher() = default;
matcher::matcher(matcher&&) noexcept = default;
matcher& matcher::operator=(matcher&&) noexcept = default;

bool matcher::accept_bytes(std::string_view bytes) {
  if (impl_->finished) return bytes.empty();
  impl_->maybe_reset();
  const int32_t to = impl_->walk(impl_->current, bytes);
  if (to == kDead) return false;
  impl_->current = to;
  return true;
}

bool matcher::can_accept(std::string_view bytes) {
  if (impl_->finished) return bytes.empty();
  impl_->maybe_reset();
  return impl_->walk(impl_->current, bytes) != kDead;
}

bool matcher::accept_token(int32_t id) {
  if (impl_->finished || id < 0) return false;
  if (static_cast<size_t>(id) < impl_->tokens->id_limit()) {
    const std::string_view bytes = impl_->tokens->bytes(id);
    if (!bytes.empty() && accept_bytes(bytes)) return true;
  }
  if (impl_->is_end_id(id) && is_complete()) {
    impl_->finished = true;
    return true;
  }
  return false;
}

bool matcher::is_complete() const { return impl_->states[static_cast<size_t>(impl_->current)].complete; }

bool matcher::is_finished() const noexcept { return impl_->finished; }

std::span<const uint64_t> matcher::allowed_mask() {
  if (impl_->finished) return impl_->no_tokens;
  impl_->maybe_reset();
  return impl_->mask_of(impl_->current);
}

void matcher::mask_logits(std::span<float> logits) {
  const std::span<const uint64_t> bits = allowed_mask();
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = w < bits.size() ? bits[w] : 0;
    if (word == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    if (word == 0) {  // the common word in a structural state: a plain fill
      std::fill(logits.begin() + static_cast<ptrdiff_t>(w * 64), logits.begin() + static_cast<ptrdiff_t>(end), neg_inf);
      continue;
    }
    for (size_t i = w * 64; i < end; ++i)
      if (!((word >> (i - w * 64)) & 1)) logits[i] = neg_inf;
  }
}

size_t matcher::num_states() const { return impl_->states.size(); }

}  // namespace troupe::grammar
