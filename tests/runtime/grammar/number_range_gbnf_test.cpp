// decimal_range against exact decimal arithmetic: for many intervals (open and closed ends,
// one-sided, negative, around zero, fractional, past the grammar's 16 digits), every text of a
// corpus of number spellings is accepted exactly when it is a plain decimal the JSON grammar
// writes (no leading zeros, no exponent, <= 16 fraction digits, never "-0") whose value lies in
// the interval.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/number_range_gbnf.hpp"
#include "tests/runtime/grammar/accepts.hpp"

namespace g = troupe::grammar;
using g::decimal;
using g::decimal_bound;
using troupe::grammar::test::accepts;

namespace {

// -?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?, not a zero with a minus.
bool plain_decimal(const std::string& t) {
  size_t i = t.starts_with('-') ? 1 : 0;
  const size_t start = i;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  const size_t int_len = i - start;
  if (int_len == 0 || int_len > 16 || (int_len > 1 && t[start] == '0')) return false;
  if (i < t.size()) {
    if (t[i] != '.') return false;
    const size_t f = ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    if (i != t.size() || i == f || i - f > 16) return false;
  }
  return !(t.starts_with('-') && decimal::parse(t).is_zero());
}

bool within(const decimal& v, const std::optional<decimal_bound>& lo, const std::optional<decimal_bound>& hi) {
  if (lo) {
    const int c = g::compare(v, lo->value);
    if (c < 0 || (c == 0 && lo->exclusive)) return false;
  }
  if (hi) {
    const int c = g::compare(v, hi->value);
    if (c > 0 || (c == 0 && hi->exclusive)) return false;
  }
  return true;
}

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  const std::vector<std::string> fractions = {"",     ".0",    ".00",  ".05", ".049", ".1",  ".1000001", ".125", ".12",
                                              ".13",  ".2",    ".25",  ".5",  ".50",  ".9",  ".99",      ".999", ".0001",
                                              ".99999999999999999", ".0000000000000001", ".00000000000000001"};
  for (int i = -30; i <= 30; ++i)
    for (const std::string& f : fractions) {
      out.push_back(std::to_string(i) + f);
      if (i == 0) out.push_back("-0" + f);
    }
  for (const char* t : {"00", "01", "01.5", "1.", ".5", "-", "", "1e2", "1E-1", "+1", "- 1", "9999999999999999",
                        "9999999999999999.5", "10000000000000000", "-9999999999999999.9999999999999999", "7.99",
                        "7.990", "7.9900001", "7.98999", "19", "18.9999999999999999", "-12.5", "-12.50", "-12.49",
                        "-12.51", "2.5", "2.4999999999999999"})
    out.push_back(t);
  return out;
}

std::optional<decimal_bound> bound(const char* text, bool exclusive) {
  if (!text) return std::nullopt;
  return decimal_bound{decimal::parse(text), exclusive};
}

}  // namespace

BOOST_AUTO_TEST_CASE(decimals_parse_exactly) {
  BOOST_TEST(decimal::parse("12.50").text() == "12.5");
  BOOST_TEST(decimal::parse("1e-07").text() == "0.0000001");
  BOOST_TEST(decimal::parse("1.5e-07").text() == "0.00000015");
  BOOST_TEST(decimal::parse("3E+2").text() == "300");
  BOOST_TEST(decimal::parse("-0.0").text() == "0");
  BOOST_TEST(!decimal::parse("-0.0").negative);
  BOOST_TEST(decimal::parse("-007.25").text() == "-7.25");
  BOOST_TEST(decimal::parse("1.25e1").text() == "12.5");
  for (const char* bad : {"", "-", "1.", ".5", "1e", "1e+", "abc", "1x", "inf", "null", "1e999"})
    BOOST_CHECK_THROW(decimal::parse(bad), std::invalid_argument);
  BOOST_TEST(g::compare(decimal::parse("0.1"), decimal::parse("0.10")) == 0);
  BOOST_TEST(g::compare(decimal::parse("0.5"), decimal::parse("0.45")) > 0);
  BOOST_TEST(g::compare(decimal::parse("-2"), decimal::parse("-10")) > 0);
  BOOST_TEST(g::compare(decimal::parse("-0.5"), decimal::parse("0")) < 0);
  BOOST_TEST(g::compare(decimal::parse("100"), decimal::parse("99.999")) > 0);
}

BOOST_AUTO_TEST_CASE(decimal_ranges_are_exact) {
  const std::vector<const char*> values = {nullptr, "-12.5", "-1", "-0.05", "0", "0.1", "0.125", "1",
                                           "2.5",   "7.99",  "19", "1e20",  "1e17"};
  const auto texts = corpus();
  size_t ranges = 0, empty = 0, accepted = 0;
  for (const char* lo_text : values)
    for (const char* hi_text : values)
      for (int flags = 0; flags < 4; ++flags) {
        if ((!lo_text && (flags & 1)) || (!hi_text && (flags & 2))) continue;
        const auto lo = bound(lo_text, flags & 1), hi = bound(hi_text, flags & 2);
        BOOST_TEST_CONTEXT("lo " << (lo_text ? lo_text : "none") << (flags & 1 ? " exclusive" : "") << ", hi "
                                 << (hi_text ? hi_text : "none") << (flags & 2 ? " exclusive" : "")) {
          const auto range = g::decimal_range(lo, hi);
          size_t mismatches = 0, in = 0;
          std::shared_ptr<const g::grammar> gr;
          if (range) gr = std::make_shared<const g::grammar>(g::parse_gbnf("root ::= " + *range + "\n"));
          for (const std::string& t : texts) {
            const bool expected = plain_decimal(t) && within(decimal::parse(t), lo, hi);
            in += expected;
            const bool got = range && accepts(gr, t);
            if (got != expected && ++mismatches <= 5)
              BOOST_ERROR("'" << t << "': expected " << expected << ", grammar " << (range ? *range : "(none)"));
          }
          accepted += in;
          ++ranges;
          empty += !range;
        }
      }
  BOOST_TEST(ranges > 300);
  BOOST_TEST(empty > 20);      // lo above hi, or 1e17 and above
  BOOST_TEST(accepted > 10000);
  BOOST_TEST_MESSAGE(ranges << " ranges, " << empty << " empty, " << accepted << " accepted texts");
}

BOOST_AUTO_TEST_CASE(integer_ranges_stay_exact) {
  for (const auto& [lo, hi] : std::vector<std::pair<int, int>>{{-37, 1234}, {0, 0}, {-5, -5}, {19, 2001}}) {
    const auto gr = std::make_shared<const g::grammar>(g::parse_gbnf("root ::= " + g::integer_range(lo, hi) + "\n"));
    for (int x = -2100; x <= 2100; ++x) BOOST_TEST(accepts(gr, std::to_string(x)) == (x >= lo && x <= hi), x);
  }
}
