// Numeric ranges as GBNF digit patterns, for JSON schema's minimum / maximum / exclusiveMinimum /
// exclusiveMaximum: the integers of an interval, and the plain decimals (no exponent) of one. The
// patterns write numbers as the JSON grammar's `integral-part` does (no leading zeros, at most 16
// integer digits) with at most 16 fraction digits, and accept exactly those whose value lies in
// the interval, compared as decimals (0.1 is one tenth, not the double nearest it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::grammar {

// The largest integer part the JSON grammar writes (16 digits).
inline constexpr int64_t kMaxIntegerPart = 9999999999999999;

// The integers from lo to hi (nullopt: unbounded on that side, within +-kMaxIntegerPart), as one
// parenthesised expression. Requires lo <= hi when both are given.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

// An exact decimal: what a JSON number's text (or the shortest text of a double) says.
struct decimal {
  bool negative = false;
  std::string integer = "0";  // digits, no leading zeros
  std::string fraction;       // digits, no trailing zeros ("" for an integer)

  // Parses "-12.50", "1e-07", "3E+2" (JSON number syntax, or what std::to_chars writes); throws
  // std::invalid_argument otherwise. Zero is never negative.
  static decimal parse(std::string_view text);
  bool is_zero() const { return integer == "0" && fraction.empty(); }
  std::string text() const { return (negative ? "-" : "") + integer + (fraction.empty() ? "" : "." + fraction); }
};

// <0, 0, >0 as a is below, equal to, above b.
int compare(const decimal& a, const decimal& b);

struct decimal_bound {
  decimal value;
  bool exclusive = false;
};

// The plain decimals v with lo <= v (lo < v when exclusive) and v <= hi (v < hi), either bound
// optional, as one parenthesised expression: "-"? integral-part ( "." [0-9]{1,16} )?, never "-0".
// nullopt when no such text exists.
std::optional<std::string> decimal_range(const std::optional<decimal_bound>& lo, const std::optional<decimal_bound>& hi);

}  // namespace troupe::grammar
