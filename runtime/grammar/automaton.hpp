// The lazily built DFA of one grammar over one vocabulary, shared by every sequence that follows
// the same grammar: states (sets of parse stacks), their byte transitions and their token masks
// are a function of the grammar alone, so a second request with the same JSON schema finds the
// masks the first one computed. Internally locked (one lock per call, not per byte).
//
// A parse position is a stack of grammar positions (frames shared between stacks, interned, so an
// equal stack is one id); a state is the set of live stacks, also interned. Moving a state by a
// byte is memoised; a state's mask is one walk of the vocabulary trie, pruned where the state
// dies, kept for when the state comes back (inside a JSON string every character returns to the
// same state, so a long string value costs one mask).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/token_table.hpp"

namespace troupe::grammar {

class automaton {
 public:
  static constexpr int32_t dead = -1;
  // States of a JSON document run about five per token; each holds a 1 KB transition table.
  static constexpr size_t default_max_states = 8192;

  // max_states: past it the automaton is full (see full()); its matchers move to a fresh one.
  automaton(std::shared_ptr<const grammar> g, std::shared_ptr<const token_table> tokens,
            size_t max_states = default_max_states);
  ~automaton();
  automaton(const automaton&) = delete;
  automaton& operator=(const automaton&) = delete;

  const std::shared_ptr<const grammar>& grammar_ptr() const noexcept { return g_; }
  const std::shared_ptr<const token_table>& tokens() const noexcept { return tokens_; }

  int32_t start() const noexcept { return start_; }
  // The state after `bytes` from s, or dead.
  int32_t walk(int32_t s, std::string_view bytes);
  bool complete(int32_t s);
  // The tokens whose bytes keep state s alive, one bit per id (end ids are the matcher's
  // business). Shared: valid for as long as it is held.
  std::shared_ptr<const std::vector<uint64_t>> mask(int32_t s);
  // Copies state s of `from` (its stacks re-interned) into this automaton and returns it here.
  int32_t adopt(automaton& from, int32_t s);

  size_t num_states();
  size_t max_states() const noexcept { return max_states_; }
  // Whether it has grown past max_states: a grammar that keeps making new states (counters, long
  // literals) must not grow without end, so matchers move on to a fresh automaton.
  bool full();

 private:
  struct impl;
  std::shared_ptr<const grammar> g_;
  std::shared_ptr<const token_table> tokens_;
  std::unique_ptr<impl> impl_;
  std::mutex mu_;
  size_t max_states_;
  int32_t start_ = dead;
};

}  // namespace troupe::grammar
