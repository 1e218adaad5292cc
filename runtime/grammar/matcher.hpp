// Follows a grammar token by token and says which tokens may come next: the structured-output
// constraint of one sequence. Its position is a state of an automaton (automaton.hpp) that
// sequences with the same grammar share; when that automaton is full the matcher moves on to a
// fresh one of its own, taking its position along.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/grammar/automaton.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/token_table.hpp"

namespace troupe::grammar {

class matcher {
 public:
  // end_ids: the tokens that end the output (EOS, stop ids); allowed once the grammar is complete.
  matcher(std::shared_ptr<automaton> a, std::vector<int32_t> end_ids);
  // With an automaton of its own.
  matcher(std::shared_ptr<const grammar> g, std::shared_ptr<const token_table> tokens,
          std::vector<int32_t> end_ids);
  ~matcher();
  matcher(matcher&&) noexcept;
  matcher& operator=(matcher&&) noexcept;

  // Consumes bytes; false (and the matcher unchanged) when the grammar does not allow them.
  bool accept_bytes(std::string_view bytes);
  // Whether accept_bytes(bytes) would succeed; the matcher does not move.
  bool can_accept(std::string_view bytes);
  // Consumes a token: its bytes, or an end id once complete (the matcher is then finished and
  // allows nothing more). False, unchanged, when not allowed.
  bool accept_token(int32_t id);
  // Whether the bytes so far form a whole sentence of the grammar (an end id may come).
  bool is_complete() const;
  // Whether an end id was accepted.
  bool is_finished() const noexcept;
  // The tokens allowed next, one bit per id (bit id % 64 of word id / 64), over
  // tokens->id_limit() ids. Valid until the next call on this matcher.
  std::span<const uint64_t> allowed_mask();
  // Sets logits of tokens not allowed (ids past id_limit() too) to -inf.
  void mask_logits(std::span<float> logits);
  // The automaton it follows now, and its number of states (for tests and benchmarks).
  const std::shared_ptr<automaton>& shared_automaton() const;
  size_t num_states() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::grammar
