// The automata of recently used grammars by their GBNF text, so that requests with the same
// format (the usual case: one response schema for every request of an application) share one
// automaton and find its masks already computed. Thread-safe; least recently used out first.
// Memory: an automaton holds at most 8,192 states (1 KB each) and 256 masks (19 KB each at
// Qwen3's vocabulary), ~13 MB; a JSON format in use typically 2-3 MB. So 32 of them are at most
// ~420 MB and usually under 100 MB.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/grammar/automaton.hpp"
#include "runtime/grammar/token_table.hpp"

namespace troupe::grammar {

class automaton_cache {
 public:
  static constexpr size_t max_cached_text = 256 * 1024;  // bigger grammars are not kept

  explicit automaton_cache(std::shared_ptr<const token_table> tokens, size_t capacity = 32);
  // The table is made on the first get(), so a server whose requests never ask for structured
  // output does not pay for it (~130 ms and ~10 MB at Qwen3's vocabulary).
  explicit automaton_cache(std::function<std::shared_ptr<const token_table>()> make_tokens, size_t capacity = 32);

  // The automaton of `gbnf`: cached, or parsed now (throws as parse_gbnf does). A cached one
  // that is full is replaced by a fresh one on the same grammar (its matchers carry on in theirs).
  std::shared_ptr<automaton> get(const std::string& gbnf);
  size_t size();

 private:
  using entry = std::pair<std::string, std::shared_ptr<automaton>>;
  const std::shared_ptr<const token_table>& tokens();

  std::function<std::shared_ptr<const token_table>()> make_tokens_;
  std::once_flag tokens_made_;
  std::shared_ptr<const token_table> tokens_;
  size_t capacity_;
  std::mutex mu_;
  std::list<entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<entry>::iterator> by_text_;
};

}  // namespace troupe::grammar
