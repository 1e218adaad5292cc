// Whether a grammar matches a whole text: the check the grammar tests share.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/matcher.hpp"
#include "runtime/grammar/token_table.hpp"

namespace troupe::grammar::test {

inline bool accepts(const std::shared_ptr<const grammar>& g, std::string_view text) {
  static const auto table = std::make_shared<const token_table>(std::vector<std::string>{"a"});
  matcher m(g, table, {});
  return m.accept_bytes(text) && m.is_complete();
}

}  // namespace troupe::grammar::test
