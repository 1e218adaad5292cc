#include "runtime/grammar/automaton_cache.hpp"

namespace troupe::grammar {

automaton_cache::automaton_cache(std::shared_ptr<const token_table> tokens, size_t capacity)
    : tokens_(std::move(tokens)), capacity_(capacity) {}

automaton_cache::automaton_cache(std::function<std::shared_ptr<const token_table>()> make_tokens, size_t capacity)
    : make_tokens_(std::move(make_tokens)), capacity_(capacity) {}

const std::shared_ptr<const token_table>& automaton_cache::tokens() {
  std::call_once(tokens_made_, [this] {
    if (!tokens_) tokens_ = make_tokens_();
  });
  return tokens_;
}

std::shared_ptr<automaton> automaton_cache::get(const std::string& gbnf) {
  {
    std::lock_guard lock(mu_);
    if (auto it = by_text_.find(gbnf); it != by_text_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      auto& a = it->second->second;
      if (a->full()) a = std::make_shared<automaton>(a->grammar_ptr(), a->tokens(), a->max_states());
      return a;
    }
  }
  // Parsed outside the lock: a large grammar must not stall other requests' look-ups.
  auto a = std::make_shared<automaton>(std::make_shared<const grammar>(parse_gbnf(gbnf)), tokens());
  if (gbnf.size() > max_cached_text || capacity_ == 0) return a;
  std::lock_guard lock(mu_);
  if (auto it = by_text_.find(gbnf); it != by_text_.end()) return it->second->second;  // a racing get
  lru_.emplace_front(gbnf, a);
  by_text_.emplace(gbnf, lru_.begin());
  if (lru_.size() > capacity_) {
    by_text_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return a;
}

size_t automaton_cache::size() {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace troupe::grammar
