// A context-free grammar over bytes, read from GBNF (llama.cpp's grammar format), that the
// structured-output matcher walks. Request formats (JSON schema, regex, choice) are turned into
// GBNF text first, so one parser and one matcher serve them all.
//
// The GBNF accepted: rules `name ::= alternatives` (names of [A-Za-z0-9_-]; a rule runs until the
// next `name ::=`); alternatives split by `|`; sequences of "literals" (escapes \n \r \t \\ \"
// \xHH \uHHHH \UHHHHHHHH), [character classes] ([a-z], [^"\\], same escapes plus \] \- \^), `.`
// (any character), rule names and ( groups ), each optionally followed by * + ? {m} {m,} {m,n};
// `#` starts a comment. Literals and classes are Unicode code points; they are compiled to their
// UTF-8 bytes, so a token ending inside a character is matched exactly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::grammar {

// A set of byte values.
struct byte_set {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const noexcept { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) noexcept { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) noexcept {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool operator==(const byte_set&) const = default;
};

// One step of an alternative: a byte from sets[index], the rule rules[index], or the end of
// the alternative.
struct element {
  enum class kind : uint8_t { bytes, rule, end };
  kind k = kind::end;
  uint32_t index = 0;
};

struct grammar {
  std::vector<byte_set> sets;
  // Every alternative's elements, each alternative closed by an `end` element.
  std::vector<element> elements;
  // Per rule: where each of its alternatives starts in `elements`. An alternative that is only
  // `end` matches the empty string.
  std::vector<std::vector<uint32_t>> rules;
  std::vector<std::string> rule_names;  // the GBNF names; generated rules get "name__N"
  uint32_t root = 0;
};

// Upper bounds that keep a request from making the server build something huge.
inline constexpr size_t kMaxGrammarBytes = 1 << 20;     // GBNF text
inline constexpr size_t kMaxGrammarElements = 1 << 21;  // after repetitions are expanded
inline constexpr uint32_t kMaxRepetition = 1000;        // m and n of {m,n}

// Parses GBNF text; `root` names the start rule. Throws troupe::error(invalid_argument) with
// "grammar: line L, column C: what was wrong" for a syntax error, an undefined or missing rule,
// a rule that can recurse without consuming a byte (left recursion, or a repetition of
// something that matches the empty string), or a size limit.
grammar parse_gbnf(std::string_view text, std::string_view root = "root");

// Escapes a string as a GBNF literal, quotes included ("a\"b" -> "\"a\\\"b\"").
std::string gbnf_literal(std::string_view s);

}  // namespace troupe::grammar
