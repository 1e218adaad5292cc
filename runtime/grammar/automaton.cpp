#include "runtime/grammar/automaton.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "runtime/core/error.hpp"

namespace troupe::grammar {

namespace {

constexpr size_t kMaxMasks = 256;  // cached masks (each is id_limit bits: ~19 KB for Qwen3)
constexpr int32_t kUnknown = -2;
// Parse stacks alive at once: an ambiguous grammar can multiply them; past this the request is
// refused rather than the executor stalled.
constexpr size_t kMaxStacks = 1 << 16;

struct vector_hash {
  size_t operator()(const std::vector<int32_t>& v) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

}  // namespace

struct automaton::impl {
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

  const grammar* g = nullptr;
  const token_table* tokens = nullptr;
  std::vector<frame> frames;
  std::unordered_map<uint64_t, int32_t> frame_ids;
  std::vector<state> states;
  std::unordered_map<std::vector<int32_t>, int32_t, vector_hash> state_ids;
  std::unordered_map<int32_t, std::shared_ptr<const std::vector<uint64_t>>> masks;

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
        if (tops.size() > kMaxStacks)
          throw_error(errc::invalid_input, "structured output: the grammar is too ambiguous here (over " +
                                               std::to_string(kMaxStacks) + " parse stacks at once)");
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
    if (tops.empty() && !complete) return dead;
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
      if (s == dead) return dead;
    }
    return s;
  }

  std::shared_ptr<const std::vector<uint64_t>> mask(int32_t s) {
    if (auto it = masks.find(s); it != masks.end()) return it->second;
    if (masks.size() >= kMaxMasks) masks.clear();  // holders keep theirs alive
    auto bits = std::make_shared<std::vector<uint64_t>>((tokens->id_limit() + 63) / 64, 0);
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
      if (to == dead) continue;
      if (nd.token >= 0) (*bits)[static_cast<size_t>(nd.token) / 64] |= uint64_t{1} << (nd.token % 64);
      for (uint32_t c = 0; c < nd.num_children; ++c) stack.push_back({nd.first_child + c, to});
    }
    return masks.emplace(s, std::move(bits)).first->second;
  }

  // The frame `f` of `from` interned here (its parents first).
  int32_t copy_frame(const impl& from, int32_t f, std::unordered_map<int32_t, int32_t>& done) {
    if (f < 0) return -1;
    if (auto it = done.find(f); it != done.end()) return it->second;
    const frame fr = from.frames[static_cast<size_t>(f)];
    const int32_t id = intern_frame(fr.pos, copy_frame(from, fr.parent, done));
    done.emplace(f, id);
    return id;
  }
};

automaton::automaton(std::shared_ptr<const grammar> g, std::shared_ptr<const token_table> tokens, size_t max_states)
    : g_(std::move(g)), tokens_(std::move(tokens)), impl_(std::make_unique<impl>()), max_states_(max_states) {
  TROUPE_ASSERT(g_ && tokens_);
  impl_->g = g_.get();
  impl_->tokens = tokens_.get();
  start_ = impl_->start_state();
  // Every rule has an alternative and a class that matches nothing is refused by the parser, so
  // the start state is never dead.
  TROUPE_ASSERT(start_ != dead);
}

automaton::~automaton() = default;

int32_t automaton::walk(int32_t s, std::string_view bytes) {
  std::lock_guard lock(mu_);
  return impl_->walk(s, bytes);
}

bool automaton::complete(int32_t s) {
  std::lock_guard lock(mu_);
  return impl_->states[static_cast<size_t>(s)].complete;
}

std::shared_ptr<const std::vector<uint64_t>> automaton::mask(int32_t s) {
  std::lock_guard lock(mu_);
  return impl_->mask(s);
}

int32_t automaton::adopt(automaton& from, int32_t s) {
  TROUPE_ASSERT(&from != this && from.g_ == g_);
  std::scoped_lock lock(mu_, from.mu_);
  const auto& st = from.impl_->states[static_cast<size_t>(s)];
  std::unordered_map<int32_t, int32_t> done;
  std::vector<int32_t> tops;
  for (int32_t f : st.tops) tops.push_back(impl_->copy_frame(*from.impl_, f, done));
  impl_->tops = std::move(tops);
  return impl_->intern_state(st.complete);
}

size_t automaton::num_states() {
  std::lock_guard lock(mu_);
  return impl_->states.size();
}

bool automaton::full() {
  std::lock_guard lock(mu_);
  return impl_->states.size() > max_states_;
}

}  // namespace troupe::grammar
