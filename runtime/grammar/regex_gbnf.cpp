// regex_to_gbnf: the pattern is parsed into a small tree (characters sets, sequences,
// alternations, repetitions), simplified so that nothing repeated can match the empty string, and
// printed as one GBNF expression.
#include "runtime/grammar/regex_gbnf.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/grammar/utf8_ranges.hpp"

namespace troupe::grammar {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kInf = UINT32_MAX;
constexpr int kMaxDepth = 100;  // group nesting; keeps the recursion off the stack limit

// Code points as sorted, disjoint, non-adjacent inclusive ranges.
struct range {
  char32_t lo, hi;
};
using char_set = std::vector<range>;

char_set normalized(char_set s) {
  std::sort(s.begin(), s.end(), [](range a, range b) { return a.lo < b.lo; });
  char_set out;
  for (range r : s) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

char_set complement(const char_set& s) {
  char_set out;
  char32_t next = 0;
  for (range r : s) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

char_set unite(char_set a, const char_set& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalized(std::move(a));
}

char_set minus(const char_set& a, const char_set& b) { return complement(unite(complement(a), b)); }

bool contains(const char_set& s, char32_t c) {
  return std::any_of(s.begin(), s.end(), [c](range r) { return r.lo <= c && c <= r.hi; });
}

// Surrogates are not characters: GBNF refuses them in escapes and UTF-8 cannot carry them.
char_set without_surrogates(const char_set& s) { return minus(s, {{0xD800, 0xDFFF}}); }

const char_set kDigit = {{'0', '9'}};
const char_set kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's WhiteSpace and LineTerminator.
const char_set kSpace = normalized({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680},
                                    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                    {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
const char_set kDot = complement(normalized({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));

struct node {
  enum class kind { empty, chars, seq, alt, repeat };
  kind k = kind::empty;
  char_set set;             // chars
  std::vector<node> kids;   // seq, alt; repeat: one
  uint32_t min = 0, max = 0;  // repeat; max kInf: unbounded
};

node chars(char_set s) { return {node::kind::chars, std::move(s), {}, 0, 0}; }
node list(node::kind k, std::vector<node> kids) { return {k, {}, std::move(kids), 0, 0}; }
node repeat(node kid, uint32_t min, uint32_t max) { return {node::kind::repeat, {}, {std::move(kid)}, min, max}; }

class regex_parser {
 public:
  explicit regex_parser(std::string_view pattern) {
    size_t p = 0;
    while (p < pattern.size()) {
      const auto c = static_cast<unsigned char>(pattern[p]);
      const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      if (len == 0 || p + len > pattern.size()) fail_at_byte("invalid UTF-8", p);
      char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
      for (size_t i = 1; i < len; ++i) {
        const auto d = static_cast<unsigned char>(pattern[p + i]);
        if ((d & 0xC0) != 0x80) fail_at_byte("invalid UTF-8", p);
        cp = (cp << 6) | (d & 0x3F);
      }
      cps_.push_back(cp);
      offsets_.push_back(p);
      p += len;
    }
    offsets_.push_back(pattern.size());
  }

  node run() {
    node n = alternation(0);
    if (more()) fail("unbalanced ')'", i_);
    return n;
  }

 private:
  [[noreturn]] static void fail_at_byte(const std::string& what, size_t offset) {
    throw_error(errc::invalid_argument, "regex: " + what + " at offset " + std::to_string(offset));
  }
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    fail_at_byte(what, offsets_[std::min(at, cps_.size())]);
  }

  bool more() const { return i_ < cps_.size(); }
  // The code point k ahead, or a value no pattern character has.
  char32_t peek(size_t k = 0) const { return i_ + k < cps_.size() ? cps_[i_ + k] : char32_t(0xFFFFFFFF); }

  node alternation(int depth) {
    std::vector<node> alts;
    alts.push_back(sequence(depth));
    while (peek() == '|') {
      ++i_;
      alts.push_back(sequence(depth));
    }
    return alts.size() == 1 ? std::move(alts[0]) : list(node::kind::alt, std::move(alts));
  }

  node sequence(int depth) {
    std::vector<node> items;
    bool anchored_start = false;
    while (more() && peek() != '|' && peek() != ')') {
      const size_t at = i_;
      // The whole text is matched, so ^ and $ where they would match anyway say nothing.
      if (peek() == '^') {
        if (depth > 0 || !items.empty() || anchored_start) fail("'^' is only supported at the start", at);
        anchored_start = true;
        ++i_;
        continue;
      }
      if (peek() == '$') {
        if (depth > 0 || (i_ + 1 < cps_.size() && cps_[i_ + 1] != '|')) fail("'$' is only supported at the end", at);
        ++i_;
        continue;
      }
      node a = atom(depth);
      items.push_back(quantified(std::move(a)));
    }
    if (items.empty()) return node{};
    return items.size() == 1 ? std::move(items[0]) : list(node::kind::seq, std::move(items));
  }

  node atom(int depth) {
    const size_t at = i_;
    const char32_t c = peek();
    switch (c) {
      case '(': return group(depth);
      case '[': return char_class();
      case '.': ++i_; return chars(kDot);
      case '\\': return escape_outside_class();
      case '*': case '+': case '?': fail("nothing to repeat", at);
      case '{':
        if (bounds(at)) fail("nothing to repeat", at);
        ++i_;
        return chars({{c, c}});
      default: ++i_; return chars({{c, c}});
    }
  }

  node group(int depth) {
    const size_t open = i_++;
    if (depth >= kMaxDepth) fail("groups nest too deep", open);
    if (peek() == '?') {
      const char32_t n = peek(1);
      if (n == ':') {
        i_ += 2;
      } else if (n == '=' || n == '!') {
        fail("lookahead is not supported", open);
      } else if (n == '<' && (peek(2) == '=' || peek(2) == '!')) {
        fail("lookbehind is not supported", open);
      } else if (n == 'P' && peek(2) == '=') {
        fail("back-references are not supported", open);
      } else if (n == '<' || (n == 'P' && peek(2) == '<')) {
        // A named group is a plain group here: there are no back-references to use the name.
        i_ += n == '<' ? 2 : 3;
        const size_t name_start = i_;
        while (more() && peek() != '>') {
          const char32_t d = peek();
          if (!((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || (d >= '0' && d <= '9') || d == '_'))
            fail("invalid group name", i_);
          ++i_;
        }
        if (!more() || i_ == name_start) fail("invalid group name", open);
        ++i_;
      } else {
        fail("unsupported group syntax '(?'", open);
      }
    }
    node inner = alternation(depth + 1);
    if (peek() != ')') fail("unbalanced '('", open);
    ++i_;
    return inner;
  }

  struct counts {
    uint32_t min, max;
    size_t end;  // index after the '}'
  };

  // {m}, {m,} or {m,n} at index j; nullopt when the brace is not a quantifier (then a literal).
  std::optional<counts> bounds(size_t j) const {
    auto number = [&](size_t& k) -> std::optional<uint64_t> {
      const size_t start = k;
      uint64_t v = 0;
      while (k < cps_.size() && cps_[k] >= '0' && cps_[k] <= '9') {
        v = std::min<uint64_t>(v * 10 + (cps_[k] - '0'), uint64_t{1} << 40);
        ++k;
      }
      if (k == start) return std::nullopt;
      return v;
    };
    size_t k = j + 1;
    const auto lo = number(k);
    if (!lo) return std::nullopt;
    std::optional<uint64_t> hi = lo;
    if (k < cps_.size() && cps_[k] == ',') {
      ++k;
      hi = number(k);
      if (!hi) hi = kInf;
    }
    if (k >= cps_.size() || cps_[k] != '}') return std::nullopt;
    for (uint64_t v : {*lo, *hi})
      if (v != kInf && v > kMaxRepetition)
        fail("repetition bound " + std::to_string(v) + " is over the limit of " + std::to_string(kMaxRepetition), j);
    if (*hi < *lo) fail("repetition {m,n} with m > n", j);
    return counts{static_cast<uint32_t>(*lo), static_cast<uint32_t>(*hi), k + 1};
  }

  node quantified(node a) {
    uint32_t lo = 1, hi = 1;
    const char32_t q = peek();
    if (q == '*') {
      lo = 0, hi = kInf, ++i_;
    } else if (q == '+') {
      lo = 1, hi = kInf, ++i_;
    } else if (q == '?') {
      lo = 0, hi = 1, ++i_;
    } else if (q == '{' && bounds(i_)) {
      const counts c = *bounds(i_);
      lo = c.min, hi = c.max, i_ = c.end;
    } else {
      return a;
    }
    if (peek() == '?') ++i_;  // lazy: the same strings match
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && bounds(i_)))
      fail("nothing to repeat", i_);
    return repeat(std::move(a), lo, hi);
  }

  uint32_t hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const char32_t h = peek();
      const int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                  : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
      if (d < 0) fail("expected a hex digit", i_);
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  // \uHHHH (a surrogate pair of them is one character) or \u{H...}; i_ is after the 'u'.
  char32_t unicode_escape(size_t at) {
    if (peek() == '{') {
      ++i_;
      uint32_t v = 0;
      size_t n = 0;
      while (more() && peek() != '}') {
        v = std::min<uint32_t>(v * 16 + hex(1), 0x7FFFFFFF);
        ++n;
      }
      if (!more() || n == 0 || v > kMaxCodePoint) fail("invalid \\u{...} escape", at);
      ++i_;
      if (v >= 0xD800 && v <= 0xDFFF) fail("a lone surrogate is not a character", at);
      return v;
    }
    const uint32_t v = hex(4);
    if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      i_ += 2;
      const uint32_t low = hex(4);
      if (low < 0xDC00 || low > 0xDFFF) fail("a lone surrogate is not a character", at);
      return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
    }
    if (v >= 0xD800 && v <= 0xDFFF) fail("a lone surrogate is not a character", at);
    return v;
  }

  // A one-character escape whose letter `e` was just read; `at` is the backslash.
  char32_t char_escape(char32_t e, size_t at, bool in_class) {
    switch (e) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("octal escapes are not supported", at);
        return 0;
      case 'x': return hex(2);
      case 'u': return unicode_escape(at);
      case 'c': {
        const char32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) fail("\\c must be followed by a letter", at);
        ++i_;
        return l % 32;
      }
      case 'b':
        if (in_class) return '\b';
        fail("word boundary assertions are not supported", at);
      case 'B': fail("word boundary assertions are not supported", at);
      case 'k': fail("back-references are not supported", at);
      case 'p': case 'P': fail("Unicode property escapes are not supported", at);
      default:
        if (e >= '1' && e <= '9') fail(in_class ? "octal escapes are not supported" : "back-references are not supported", at);
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) fail(std::string("unknown escape '\\") + char(e) + "'", at);
        return e;  // \. \\ \/ \- \( ...: the character itself
    }
  }

  // \d \D \w \W \s \S, or nullopt (nothing read) for other escapes.
  std::optional<char_set> class_escape() {
    switch (peek(1)) {
      case 'd': i_ += 2; return kDigit;
      case 'D': i_ += 2; return complement(kDigit);
      case 'w': i_ += 2; return kWord;
      case 'W': i_ += 2; return complement(kWord);
      case 's': i_ += 2; return kSpace;
      case 'S': i_ += 2; return complement(kSpace);
      default: return std::nullopt;
    }
  }

  node escape_outside_class() {
    const size_t at = i_;
    if (i_ + 1 >= cps_.size()) fail("'\\' at the end of the pattern", at);
    if (auto s = class_escape()) return chars(*s);
    i_ += 2;
    const char32_t c = char_escape(cps_[at + 1], at, false);
    return chars({{c, c}});
  }

  node char_class() {
    const size_t open = i_++;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++i_;
    }
    char_set s;
    // One member: a set escape (nullopt char) or a character.
    auto member = [&](char_set& escape_set) -> std::optional<char32_t> {
      if (!more()) fail("unterminated character class", open);
      if (peek() == '\\') {
        const size_t at = i_;
        if (i_ + 1 >= cps_.size()) fail("unterminated character class", open);
        if (auto e = class_escape()) {
          escape_set = *e;
          return std::nullopt;
        }
        i_ += 2;
        if (cps_[at + 1] == '-') return '-';
        return char_escape(cps_[at + 1], at, true);
      }
      return cps_[i_++];
    };
    while (true) {
      if (!more()) fail("unterminated character class", open);
      if (peek() == ']') {
        ++i_;
        break;
      }
      const size_t at = i_;
      char_set lo_set;
      const auto lo = member(lo_set);
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < cps_.size()) {
        ++i_;
        char_set hi_set;
        const auto hi = member(hi_set);
        if (!lo || !hi) fail("a class escape cannot bound a range", at);
        if (*hi < *lo) fail("class range out of order", at);
        s.push_back({*lo, *hi});
      } else if (lo) {
        s.push_back({*lo, *lo});
      } else {
        s = unite(std::move(s), lo_set);
      }
    }
    s = normalized(std::move(s));
    if (negated) s = complement(s);
    if (without_surrogates(s).empty()) fail("the character class matches nothing", open);
    return chars(std::move(s));
  }

  std::u32string cps_;
  std::vector<size_t> offsets_;  // byte offset of each code point, then the pattern's length
  size_t i_ = 0;
};

// --- Simplification: nothing that can match "" may be repeated (the GBNF parser refuses it). ---

bool nullable(const node& n) {
  switch (n.k) {
    case node::kind::empty: return true;
    case node::kind::chars: return false;
    case node::kind::seq: return std::all_of(n.kids.begin(), n.kids.end(), nullable);
    case node::kind::alt: return std::any_of(n.kids.begin(), n.kids.end(), nullable);
    case node::kind::repeat: return n.min == 0 || nullable(n.kids[0]);
  }
  return false;
}

// The same language without the empty string (nullopt: nothing left). `n` is simplified.
std::optional<node> non_empty(const node& n) {
  switch (n.k) {
    case node::kind::empty: return std::nullopt;
    case node::kind::chars: return n;
    case node::kind::repeat: {
      if (n.max == 0) return std::nullopt;
      if (n.max == 1) return n.kids[0];
      node r = n;
      r.min = std::max<uint32_t>(r.min, 1);
      return r;
    }
    case node::kind::alt: {
      std::vector<node> alts;
      for (const node& k : n.kids)
        if (auto e = non_empty(k)) alts.push_back(std::move(*e));
      if (alts.empty()) return std::nullopt;
      return alts.size() == 1 ? std::move(alts[0]) : list(node::kind::alt, std::move(alts));
    }
    case node::kind::seq: {
      if (!nullable(n)) return n;
      // Every part can be empty: the first non-empty part is part j, then anything of the rest.
      std::vector<node> alts;
      for (size_t j = 0; j < n.kids.size(); ++j) {
        auto first = non_empty(n.kids[j]);
        if (!first) continue;
        std::vector<node> s{std::move(*first)};
        s.insert(s.end(), n.kids.begin() + static_cast<std::ptrdiff_t>(j) + 1, n.kids.end());
        alts.push_back(s.size() == 1 ? std::move(s[0]) : list(node::kind::seq, std::move(s)));
      }
      if (alts.empty()) return std::nullopt;
      return alts.size() == 1 ? std::move(alts[0]) : list(node::kind::alt, std::move(alts));
    }
  }
  return std::nullopt;
}

node simplify(const node& n) {
  switch (n.k) {
    case node::kind::empty:
    case node::kind::chars: return n;
    case node::kind::seq: {
      std::vector<node> out;
      for (const node& k : n.kids) {
        node s = simplify(k);
        if (s.k == node::kind::empty) continue;
        if (s.k == node::kind::seq)
          out.insert(out.end(), s.kids.begin(), s.kids.end());
        else
          out.push_back(std::move(s));
      }
      if (out.empty()) return node{};
      return out.size() == 1 ? std::move(out[0]) : list(node::kind::seq, std::move(out));
    }
    case node::kind::alt: {
      std::vector<node> out;
      for (const node& k : n.kids) {
        node s = simplify(k);
        if (s.k == node::kind::alt)
          out.insert(out.end(), s.kids.begin(), s.kids.end());
        else
          out.push_back(std::move(s));
      }
      return list(node::kind::alt, std::move(out));
    }
    case node::kind::repeat: {
      if (n.max == 0) return node{};
      node kid = simplify(n.kids[0]);
      uint32_t min = n.min;
      if (nullable(kid)) {
        // X{m,n} with X able to match "" is X'{0,n}, X' being X without "".
        auto ne = non_empty(kid);
        if (!ne) return node{};
        kid = std::move(*ne);
        min = 0;
      }
      if (min == 1 && n.max == 1) return kid;
      // (x+)* and (x+)+ are x* and x+.
      if (kid.k == node::kind::repeat && kid.min == 1 && kid.max == kInf && n.max == kInf && min <= 1)
        return repeat(std::move(kid.kids[0]), min, kInf);
      return repeat(std::move(kid), min, n.max);
    }
  }
  return n;
}

// --- Printing ---

std::string hex_digits(uint32_t v, int n) {
  static const char* digits = "0123456789ABCDEF";
  std::string s(static_cast<size_t>(n), '0');
  for (int i = n - 1; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

std::string class_char(char32_t c) {
  if (c == '\\' || c == ']' || c == '[' || c == '-' || c == '^') return std::string("\\") + char(c);
  if (c < 0x20 || c == 0x7F) return "\\x" + hex_digits(c, 2);
  if (c < 0x80) return std::string(1, char(c));
  if (c <= 0xFFFF) return "\\u" + hex_digits(c, 4);
  return "\\U" + hex_digits(c, 8);
}

// A GBNF class for the set (surrogates dropped); "" when nothing is left.
std::string class_text(const char_set& set) {
  const char_set s = without_surrogates(set);
  if (s.empty()) return "";
  const char_set inv = without_surrogates(complement(s));
  if (inv.empty()) return ".";
  const bool negate = inv.size() < s.size();
  std::string out = negate ? "[^" : "[";
  for (range r : negate ? inv : s) {
    out += class_char(r.lo);
    if (r.hi == r.lo) continue;
    if (r.hi != r.lo + 1) out += '-';
    out += class_char(r.hi);
  }
  return out + "]";
}

size_t code_points(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

class printer {
 public:
  explicit printer(bool json) : json_(json) {}

  // prec 0: alternatives may stand bare; 1: part of a sequence; 2: the operand of a quantifier.
  std::string print(const node& n, int prec) const {
    switch (n.k) {
      case node::kind::empty: return "\"\"";
      case node::kind::chars: {
        if (auto t = literal_text(n)) {
          const std::string lit = gbnf_literal(*t);
          return prec == 2 && code_points(*t) > 1 ? "(" + lit + ")" : lit;
        }
        return set_expr(n.set, prec);
      }
      case node::kind::seq: {
        std::string out, run;
        auto put = [&](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
        for (const node& k : n.kids) {
          if (auto t = literal_text(k)) {
            run += *t;
            continue;
          }
          if (!run.empty()) put(gbnf_literal(run));
          run.clear();
          put(print(k, 1));
        }
        if (!run.empty()) put(gbnf_literal(run));
        return prec == 2 ? "(" + out + ")" : out;
      }
      case node::kind::alt: {
        std::string out;
        for (const node& k : n.kids) out += (out.empty() ? "" : " | ") + print(k, 1);
        return prec >= 1 ? "(" + out + ")" : out;
      }
      case node::kind::repeat: {
        const uint32_t lo = n.min, hi = n.max;
        std::string q = hi == kInf ? (lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}")
                        : lo == 0 && hi == 1 ? "?"
                        : lo == hi ? "{" + std::to_string(lo) + "}"
                                   : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        // GBNF takes one quantifier per operand: x{1,2}{0,5} is written (x{1,2}){0,5}.
        const node& kid = n.kids[0];
        return (kid.k == node::kind::repeat ? "(" + print(kid, 1) + ")" : print(kid, 2)) + q;
      }
    }
    return "";
  }

 private:
  // The text a one-character node stands for, when a single literal spells it.
  std::optional<std::string> literal_text(const node& n) const {
    if (n.k != node::kind::chars || n.set.size() != 1 || n.set[0].lo != n.set[0].hi) return std::nullopt;
    const char32_t c = n.set[0].lo;
    std::string out;
    if (json_ && c < 0x20) {
      if (auto e = short_escape(c)) return std::string("\\") + *e;
      return std::nullopt;  // \u00XX, whose hex digits may be either case: a class
    }
    if (json_ && (c == '"' || c == '\\')) return std::string("\\") + char(c);
    append_utf8(out, c);
    return out;
  }

  static std::optional<char> short_escape(char32_t c) {
    switch (c) {
      case '\b': return 'b';
      case '\t': return 't';
      case '\n': return 'n';
      case '\f': return 'f';
      case '\r': return 'r';
      default: return std::nullopt;
    }
  }

  std::string set_expr(const char_set& s, int prec) const {
    if (!json_) return class_text(s);
    // In a JSON string `"`, `\` and control characters only appear escaped.
    std::vector<std::string> alts;
    if (std::string raw = class_text(minus(s, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}})); !raw.empty())
      alts.push_back(raw);
    if (contains(s, '"')) alts.push_back(gbnf_literal("\\\""));
    if (contains(s, '\\')) alts.push_back(gbnf_literal("\\\\"));
    for (char32_t c = 0; c < 0x20; ++c)
      if (contains(s, c) && short_escape(c)) alts.push_back(gbnf_literal(std::string("\\") + *short_escape(c)));
    for (char32_t high = 0; high < 2; ++high) {
      std::string digits;
      for (char32_t low = 0; low < 16; ++low) {
        const char32_t c = high * 16 + low;
        if (!contains(s, c) || short_escape(c)) continue;
        digits += low < 10 ? std::string(1, char('0' + low))
                           : std::string{char('a' + low - 10), char('A' + low - 10)};
      }
      if (!digits.empty()) alts.push_back(gbnf_literal("\\u00" + std::to_string(static_cast<unsigned>(high))) + " [" + digits + "]");
    }
    if (alts.size() == 1 && (alts[0][0] == '[' || alts[0] == ".")) return alts[0];
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
    return prec >= 1 ? "(" + out + ")" : out;
  }

  bool json_;
};

std::string convert(std::string_view pattern, bool json) {
  const node tree = simplify(regex_parser(pattern).run());
  std::string out = printer(json).print(tree, 1);
  if (out.size() > kMaxGrammarBytes)
    throw_error(errc::invalid_argument, "regex: the pattern's grammar is over " + std::to_string(kMaxGrammarBytes) +
                                            " bytes at offset 0");
  return out;
}

}  // namespace

std::string regex_to_gbnf(std::string_view pattern) { return convert(pattern, false); }

std::string regex_to_gbnf_json_string(std::string_view pattern) { return convert(pattern, true); }

}  // namespace troupe::grammar
