#include "runtime/grammar/number_range_gbnf.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "runtime/grammar/gbnf_text.hpp"

namespace troupe::grammar {

namespace {

constexpr int kMaxIntegerDigits = 16;   // `integral-part`
constexpr int kMaxFractionDigits = 16;  // the JSON grammar's "." [0-9]{1,16}

std::string alternatives(const std::vector<std::string>& parts) { return "( " + join(parts, " | ") + " )"; }

std::string literal(const std::string& text) { return text.empty() ? "" : "\"" + text + "\""; }

std::string digits_class(char lo, char hi) {
  return lo == hi ? std::string("\"") + lo + "\"" : std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) { return n == 0 ? "" : n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}"; }

std::string up_to_digits(int n) { return n <= 0 ? "" : "[0-9]{0," + std::to_string(n) + "}"; }

// ---- integers ----

// Alternatives for the numbers from x to y, digit strings of one length, after `prefix`.
void same_length(const std::string& x, const std::string& y, const std::string& prefix, std::vector<std::string>& out) {
  size_t p = 0;
  while (p < x.size() && x[p] == y[p]) ++p;
  const std::string pre = prefix + x.substr(0, p);
  if (p == x.size()) {
    out.push_back(literal(pre));
    return;
  }
  const std::string xs = x.substr(p + 1), ys = y.substr(p + 1);
  const size_t m = xs.size();
  const bool low_full = xs == std::string(m, '0'), high_full = ys == std::string(m, '9');
  const char mid_lo = low_full ? x[p] : char(x[p] + 1), mid_hi = high_full ? y[p] : char(y[p] - 1);
  if (!low_full) same_length(xs, std::string(m, '9'), pre + x[p], out);
  if (mid_lo <= mid_hi) out.push_back(join({literal(pre), digits_class(mid_lo, mid_hi), any_digits(m)}, " "));
  if (!high_full) same_length(std::string(m, '0'), ys, pre + y[p], out);
}

// The integers from a to b (0 <= a <= b), without leading zeros.
std::vector<std::string> unsigned_range(int64_t a, int64_t b) {
  std::vector<std::string> out;
  const std::string sa = std::to_string(a), sb = std::to_string(b);
  int64_t low = 1;  // 10^(d-1)
  for (size_t d = 1; d <= sb.size(); ++d, low *= 10) {
    if (d < sa.size()) continue;
    const int64_t lo = std::max(a, d == 1 ? 0 : low), hi = std::min(b, low * 10 - 1);
    if (lo <= hi) same_length(std::to_string(lo), std::to_string(hi), "", out);
  }
  return out;
}

// ---- fractions ----

// A bound on a fraction's digits F (the value 0.F): its digits and whether it is exclusive.
// No upper bound: 0.F < 1 always.
struct digits_bound {
  std::string digits;  // no trailing zeros
  bool exclusive = false;
};

// Adds the alternatives for fraction digit strings `prefix` + R, R of 1..budget digits, with
// lo <= 0.R (lo < 0.R when exclusive) and 0.R <= hi, each bound's digits read after `prefix`.
void fraction_range(const digits_bound& lo, const std::optional<digits_bound>& hi, int budget, const std::string& prefix,
                    std::vector<std::string>& out) {
  const int a = lo.digits.empty() ? 0 : lo.digits[0] - '0';
  const int b = !hi ? 10 : hi->digits.empty() ? 0 : hi->digits[0] - '0';
  const std::string a_rest = lo.digits.empty() ? "" : lo.digits.substr(1);
  const std::string b_rest = !hi || hi->digits.empty() ? "" : hi->digits.substr(1);
  if (a > b) return;
  // First digits strictly between the bounds' own: anything may follow.
  if (a + 1 <= b - 1)
    out.push_back(join({literal(prefix), digits_class(char('0' + a + 1), char('0' + b - 1)), up_to_digits(budget - 1)}, " "));
  // The lower bound's digit: the text may end here only if it then equals the bound (its digits
  // end too) and the bound is inclusive, or lies below the upper one.
  const std::string pa = prefix + char('0' + a);
  const bool end_meets_lo = a_rest.empty() && !lo.exclusive;  // ends at a: 0.pa == lo, else below it
  if (a < b) {
    if (end_meets_lo) out.push_back(literal(pa));
    if (budget > 1) fraction_range({a_rest, lo.exclusive}, std::nullopt, budget - 1, pa, out);
  } else {  // a == b: both bounds continue
    const bool end_below_hi = !b_rest.empty() || !hi->exclusive;
    if (end_meets_lo && end_below_hi) out.push_back(literal(pa));
    if (budget > 1) fraction_range({a_rest, lo.exclusive}, digits_bound{b_rest, hi->exclusive}, budget - 1, pa, out);
    return;
  }
  // The upper bound's digit (a < b here): ends below or at the bound.
  if (hi) {
    const std::string pb = prefix + char('0' + b);
    if (!b_rest.empty() || !hi->exclusive) out.push_back(literal(pb));
    if (budget > 1) fraction_range({"", false}, digits_bound{b_rest, hi->exclusive}, budget - 1, pb, out);
  }
}

// ---- magnitudes ----

std::optional<int64_t> integer_part(const decimal& d) {
  if (d.integer.size() > static_cast<size_t>(kMaxIntegerDigits)) return std::nullopt;
  return std::stoll(d.integer);
}

// The texts with integer part `digits`: the bare integer when `whole`, and with a fraction
// between the two bounds (fraction_range).
void with_fraction(const std::string& digits, bool whole, const digits_bound& lo, const std::optional<digits_bound>& hi,
                   std::vector<std::string>& out) {
  if (whole) out.push_back(literal(digits));
  std::vector<std::string> fr;
  fraction_range(lo, hi, kMaxFractionDigits, "", fr);
  if (!fr.empty()) out.push_back(join({literal(digits + "."), alternatives(fr)}, " "));
}

// Unsigned plain decimals m with lo <= m (lo < m) and m <= hi (m < hi), lo >= 0, hi >= 0 or none.
std::vector<std::string> magnitude_range(const decimal_bound& lo, const std::optional<decimal_bound>& hi) {
  std::vector<std::string> out;
  const auto lo_int = integer_part(lo.value);
  if (!lo_int) return out;  // above every integer part the grammar writes
  std::optional<int64_t> hi_int;
  if (hi) {
    hi_int = integer_part(hi->value);
    if (hi_int && *hi_int < *lo_int) return out;
  }
  const std::string li = std::to_string(*lo_int);
  const digits_bound lo_frac{lo.value.fraction, lo.exclusive};
  const bool lo_whole = lo.value.fraction.empty() && !lo.exclusive;  // the bare integer reaches lo
  if (hi_int && *hi_int == *lo_int) {  // one integer part: the fraction between both bounds
    const bool hi_whole = !hi->value.fraction.empty() || !hi->exclusive;
    with_fraction(li, lo_whole && hi_whole, lo_frac, digits_bound{hi->value.fraction, hi->exclusive}, out);
    return out;
  }
  // Integer part == lo's: the fraction above lo's.
  with_fraction(li, lo_whole, lo_frac, std::nullopt, out);
  // Integer parts strictly between: any fraction.
  const int64_t top = hi_int ? *hi_int - 1 : kMaxIntegerPart;
  if (*lo_int + 1 <= top)
    out.push_back(join({alternatives(unsigned_range(*lo_int + 1, top)),
                        "( \".\" [0-9]{1," + std::to_string(kMaxFractionDigits) + "} )?"},
                       " "));
  // Integer part == hi's: the fraction below hi's.
  if (hi_int)
    with_fraction(std::to_string(*hi_int), !hi->value.fraction.empty() || !hi->exclusive, digits_bound{"", false},
                  digits_bound{hi->value.fraction, hi->exclusive}, out);
  return out;
}

decimal negated(decimal d) {
  if (!d.is_zero()) d.negative = !d.negative;
  return d;
}

}  // namespace

std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {
    const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1, mag_hi = lo ? -*lo : kMaxIntegerPart;
    alts.push_back("\"-\" " + alternatives(unsigned_range(mag_lo, mag_hi)));
  }
  if (!hi || *hi >= 0) {
    const auto part = unsigned_range(lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : kMaxIntegerPart);
    alts.insert(alts.end(), part.begin(), part.end());
  }
  return alternatives(alts);
}

decimal decimal::parse(std::string_view text) {
  const auto bad = [&] { throw std::invalid_argument("not a finite decimal number: '" + std::string(text) + "'"); };
  size_t i = 0;
  decimal d;
  bool neg = false;
  if (i < text.size() && text[i] == '-') neg = true, ++i;
  std::string digits;
  size_t int_len = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') digits += text[i++], ++int_len;
  if (int_len == 0) bad();
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') digits += text[i++];
    if (i == start) bad();
  }
  long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) eneg = text[i++] == '-';
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      exponent = exponent * 10 + (text[i++] - '0');
      if (exponent > 400) bad();  // past any double
    }
    if (i == start) bad();
    if (eneg) exponent = -exponent;
  }
  if (i != text.size()) bad();
  // The digits with the point after int_len + exponent of them.
  long point = static_cast<long>(int_len) + exponent;
  if (point < 0) digits.insert(0, static_cast<size_t>(-point), '0'), point = 0;
  if (point > static_cast<long>(digits.size())) digits.append(static_cast<size_t>(point) - digits.size(), '0');
  std::string integer = digits.substr(0, static_cast<size_t>(point)), fraction = digits.substr(static_cast<size_t>(point));
  integer.erase(0, std::min(integer.find_first_not_of('0'), integer.size()));
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  d.integer = integer.empty() ? "0" : integer;
  d.fraction = fraction;
  d.negative = neg && !d.is_zero();
  return d;
}

int compare(const decimal& a, const decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int mag = a.integer.size() != b.integer.size() ? (a.integer.size() < b.integer.size() ? -1 : 1)
            : a.integer != b.integer          ? (a.integer < b.integer ? -1 : 1)
            : a.fraction != b.fraction        ? (a.fraction < b.fraction ? -1 : 1)  // no trailing zeros: lexicographic
                                              : 0;
  return a.negative ? -mag : mag;
}

std::optional<std::string> decimal_range(const std::optional<decimal_bound>& lo, const std::optional<decimal_bound>& hi) {
  std::vector<std::string> alts;
  const decimal zero;
  // Negative numbers, "-" then a magnitude m > 0 (never "-0"): v = -m.
  if (!lo || lo->value.negative) {
    decimal_bound m_lo{zero, true};  // m > 0
    if (hi && hi->value.negative) m_lo = {negated(hi->value), hi->exclusive};
    std::optional<decimal_bound> m_hi;
    if (lo) m_hi = decimal_bound{negated(lo->value), lo->exclusive};
    const auto mags = magnitude_range(m_lo, m_hi);
    if (!mags.empty()) alts.push_back("\"-\" " + alternatives(mags));
  }
  // Zero and positive numbers: v = m >= 0.
  if (!hi || !hi->value.negative) {
    const decimal_bound m_lo = lo && !lo->value.negative ? *lo : decimal_bound{zero, false};
    const auto mags = magnitude_range(m_lo, hi);
    alts.insert(alts.end(), mags.begin(), mags.end());
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

}  // namespace troupe::grammar
