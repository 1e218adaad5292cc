// parse_gbnf: a recursive-descent reader of GBNF that emits byte-level rules directly. Groups and
// repetitions become generated rules (x* is R ::= x R | "", which the matcher runs without
// growing its stack: a reference in tail position returns straight to its caller).
#include "runtime/grammar/grammar.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "runtime/core/error.hpp"
#include "runtime/grammar/grammar_check.hpp"
#include "runtime/grammar/utf8_ranges.hpp"

namespace troupe::grammar {

namespace {

using seq = std::vector<element>;
constexpr uint32_t kUnbounded = UINT32_MAX;

class gbnf_parser {
 public:
  explicit gbnf_parser(std::string_view text) : t_(text) {}

  grammar run(std::string_view root_name) {
    if (t_.size() > kMaxGrammarBytes)
      fail(0, "the grammar is " + std::to_string(t_.size()) + " bytes, over the limit of " +
                  std::to_string(kMaxGrammarBytes));
    for (skip_space(); p_ < t_.size(); skip_space()) {
      const size_t at = p_;
      const std::string name = read_name();
      skip_space();
      if (t_.substr(p_, 3) != "::=") fail(p_, "expected '::=' after rule name '" + name + "'");
      p_ += 3;
      const uint32_t r = rule_id(name, at);
      if (defined_[r]) fail(at, "rule '" + name + "' is defined twice");
      defined_[r] = 1;
      where_[r] = at;
      alts_[r] = read_alternatives(name, 0);
      if (p_ < t_.size() && t_[p_] == ')') fail(p_, "unmatched ')'");
    }
    for (size_t r = 0; r < names_.size(); ++r)
      if (!defined_[r]) fail(where_[r], "rule '" + names_[r] + "' is used but never defined");
    auto root = ids_.find(std::string(root_name));
    if (root == ids_.end()) fail(t_.size(), "no rule named '" + std::string(root_name) + "'");
    grammar g;
    g.sets = std::move(sets_);
    g.rule_names = names_;
    g.root = root->second;
    g.rules.resize(alts_.size());
    for (size_t r = 0; r < alts_.size(); ++r)
      for (const seq& a : alts_[r]) {
        g.rules[r].push_back(static_cast<uint32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), a.begin(), a.end());
        g.elements.push_back({element::kind::end, 0});
      }
    if (auto loop = find_empty_loop(g))
      fail(where_[*loop], "rule '" + names_[*loop] +
                              "' can recurse without consuming input (left recursion, or a "
                              "repetition of something that can match the empty string)");
    return g;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw_error(errc::invalid_argument,
                "grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }

  // Spaces, newlines and # comments.
  void skip_space() {
    while (p_ < t_.size()) {
      const char c = t_[p_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++p_;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t start = p_;
    while (p_ < t_.size() && name_char(t_[p_])) ++p_;
    if (p_ == start) fail(p_, "expected a rule name");
    return std::string(t_.substr(start, p_ - start));
  }

  // Whether a `name ::=` starts at p_ (the end of the rule being read).
  bool at_rule_start() const {
    size_t q = p_;
    while (q < t_.size() && name_char(t_[q])) ++q;
    if (q == p_) return false;
    while (q < t_.size() && (t_[q] == ' ' || t_[q] == '\t' || t_[q] == '\n' || t_[q] == '\r')) ++q;
    return t_.substr(q, 3) == "::=";
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto [it, fresh] = ids_.emplace(name, static_cast<uint32_t>(names_.size()));
    if (fresh) {
      names_.push_back(name);
      alts_.emplace_back();
      defined_.push_back(0);
      where_.push_back(at);
    }
    return it->second;
  }

  uint32_t new_rule(const std::string& base, size_t at, std::vector<seq> alts) {
    const uint32_t r = rule_id(base + "__" + std::to_string(++generated_), at);
    defined_[r] = 1;
    count(alts);
    alts_[r] = std::move(alts);
    return r;
  }

  void count(const std::vector<seq>& alts) {
    for (const seq& a : alts) num_elements_ += a.size() + 1;
    if (num_elements_ > kMaxGrammarElements)
      fail(p_, "the grammar expands to over " + std::to_string(kMaxGrammarElements) +
                   " elements (lower the repetition counts)");
  }

  uint32_t set_id(const byte_set& s) {
    auto [it, fresh] = set_ids_.emplace(s.bits, static_cast<uint32_t>(sets_.size()));
    if (fresh) sets_.push_back(s);
    return it->second;
  }

  element byte_element(uint8_t b) {
    byte_set s;
    s.set(b);
    return {element::kind::bytes, set_id(s)};
  }

  std::vector<seq> read_alternatives(const std::string& rule, int depth) {
    std::vector<seq> alts;
    alts.push_back(read_sequence(rule, depth));
    while (p_ < t_.size() && t_[p_] == '|') {
      ++p_;
      alts.push_back(read_sequence(rule, depth));
    }
    count(alts);
    return alts;
  }

  seq read_sequence(const std::string& rule, int depth) {
    seq out;
    for (;;) {
      skip_space();
      if (p_ >= t_.size() || t_[p_] == '|' || t_[p_] == ')') break;
      if (depth == 0 && at_rule_start()) break;
      const size_t at = p_;
      seq atom = read_atom(rule, depth);
      skip_space();
      atom = read_quantifier(rule, at, std::move(atom));
      out.insert(out.end(), atom.begin(), atom.end());
      if (out.size() > kMaxGrammarElements) fail(at, "the rule is too long");
    }
    return out;
  }

  seq read_atom(const std::string& rule, int depth) {
    const char c = t_[p_];
    if (c == '"') return read_literal();
    if (c == '[') return read_class(rule);
    if (c == '.') {
      ++p_;
      return class_elements(rule, p_ - 1, {{0, 0x10FFFF}});
    }
    if (c == '(') {
      const size_t at = p_++;
      if (depth > 200) fail(at, "groups nest too deep");
      std::vector<seq> alts = read_alternatives(rule, depth + 1);
      if (p_ >= t_.size() || t_[p_] != ')') fail(at, "'(' is never closed");
      ++p_;
      if (alts.size() == 1) return std::move(alts[0]);
      return {{element::kind::rule, new_rule(rule, at, std::move(alts))}};
    }
    if (name_char(c)) {
      const size_t at = p_;
      return {{element::kind::rule, rule_id(read_name(), at)}};
    }
    fail(p_, std::string("unexpected character '") + c + "'");
  }

  // A code point of the grammar text at p_ (escapes resolved); `quote` ends the literal.
  uint32_t read_char() {
    if (p_ >= t_.size()) fail(p_, "unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(t_[p_]);
    if (c == '\\') {
      if (p_ + 1 >= t_.size()) fail(p_, "unexpected end after '\\'");
      const char e = t_[p_ + 1];
      p_ += 2;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
          return static_cast<unsigned char>(e);
        case 'x': return read_hex(2);
        case 'u': return read_hex(4);
        case 'U': return read_hex(8);
        default: fail(p_ - 2, std::string("unknown escape '\\") + e + "'");
      }
    }
    // UTF-8 of the grammar text itself.
    const int len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || p_ + static_cast<size_t>(len) > t_.size()) fail(p_, "invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < len; ++i) {
      const auto d = static_cast<unsigned char>(t_[p_ + static_cast<size_t>(i)]);
      if ((d & 0xC0) != 0x80) fail(p_, "invalid UTF-8 in the grammar");
      cp = (cp << 6) | (d & 0x3F);
    }
    p_ += static_cast<size_t>(len);
    return cp;
  }

  uint32_t read_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++p_) {
      if (p_ >= t_.size()) fail(p_, "unexpected end in a hex escape");
      const char h = t_[p_];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                  : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail(p_, "expected a hex digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail(p_, "escape is not a Unicode scalar value");
    return v;
  }

  seq read_literal() {
    const size_t at = p_++;
    seq out;
    std::string bytes;
    while (true) {
      if (p_ >= t_.size()) fail(at, "unterminated string literal");
      if (t_[p_] == '"') break;
      bytes.clear();
      append_utf8(bytes, read_char());
      for (char b : bytes) out.push_back(byte_element(static_cast<uint8_t>(b)));
    }
    ++p_;
    return out;
  }

  seq read_class(const std::string& rule) {
    const size_t at = p_++;
    bool negated = false;
    if (p_ < t_.size() && t_[p_] == '^') {
      negated = true;
      ++p_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (true) {
      if (p_ >= t_.size()) fail(at, "unterminated character class");
      if (t_[p_] == ']') break;
      const uint32_t lo = read_char();
      uint32_t hi = lo;
      if (p_ + 1 < t_.size() && t_[p_] == '-' && t_[p_ + 1] != ']') {
        ++p_;
        hi = read_char();
        if (hi < lo) fail(at, "class range is backwards");
      }
      ranges.push_back({lo, hi});
    }
    ++p_;
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (auto r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    if (negated) {
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (auto [lo, hi] : merged) {
        if (lo > next) inv.push_back({next, lo - 1});
        next = hi + 1;
      }
      if (next <= 0x10FFFF) inv.push_back({next, 0x10FFFF});
      merged = std::move(inv);
    }
    return class_elements(rule, at, merged);
  }

  // The elements matching one code point of the ranges: one byte set when all are ASCII, else a
  // generated rule with an alternative per UTF-8 byte-range sequence.
  seq class_elements(const std::string& rule, size_t at, const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    byte_set ascii;
    bool any_ascii = false;
    std::vector<seq> alts;
    for (auto [lo, hi] : ranges)
      for (const utf8_sequence& s : utf8_sequences(lo, hi)) {
        if (s.len == 1) {
          ascii.set_range(s.bytes[0].first, s.bytes[0].second);
          any_ascii = true;
          continue;
        }
        seq a;
        for (int i = 0; i < s.len; ++i) {
          byte_set b;
          b.set_range(s.bytes[static_cast<size_t>(i)].first, s.bytes[static_cast<size_t>(i)].second);
          a.push_back({element::kind::bytes, set_id(b)});
        }
        alts.push_back(std::move(a));
      }
    if (!any_ascii && alts.empty()) fail(at, "character class matches nothing");
    const element ascii_element{element::kind::bytes, any_ascii ? set_id(ascii) : 0};
    if (alts.empty()) return {ascii_element};
    if (any_ascii) alts.insert(alts.begin(), seq{ascii_element});
    return {{element::kind::rule, new_rule(rule, at, std::move(alts))}};
  }

  uint32_t read_count() {
    const size_t start = p_;
    uint64_t v = 0;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(t_[p_] - '0');
      if (v > kMaxRepetition) fail(start, "repetition count over " + std::to_string(kMaxRepetition));
      ++p_;
    }
    if (p_ == start) fail(p_, "expected a repetition count");
    return static_cast<uint32_t>(v);
  }

  seq star(const std::string& rule, size_t at, const seq& a) {
    // R ::= a R | ""  (the reference to R is a tail call)
    const uint32_t r = rule_id(rule + "__" + std::to_string(++generated_), at);
    defined_[r] = 1;
    seq loop = a;
    loop.push_back({element::kind::rule, r});
    alts_[r] = {std::move(loop), seq{}};
    count(alts_[r]);
    return {{element::kind::rule, r}};
  }

  seq read_quantifier(const std::string& rule, size_t at, seq a) {
    if (p_ >= t_.size()) return a;
    const char q = t_[p_];
    uint32_t lo = 0, hi = 0;
    if (q == '*') {
      lo = 0, hi = kUnbounded;
    } else if (q == '+') {
      lo = 1, hi = kUnbounded;
    } else if (q == '?') {
      lo = 0, hi = 1;
    } else if (q == '{') {
      ++p_;
      skip_space();
      lo = read_count();
      skip_space();
      hi = lo;
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        skip_space();
        hi = p_ < t_.size() && t_[p_] == '}' ? kUnbounded : read_count();
        skip_space();
      }
      if (p_ >= t_.size() || t_[p_] != '}') fail(at, "expected '}' to close the repetition");
      if (hi < lo) fail(at, "repetition {m,n} with n < m");
    } else {
      return a;
    }
    ++p_;
    seq out;
    for (uint32_t i = 0; i < lo; ++i) {
      out.insert(out.end(), a.begin(), a.end());
      if (out.size() > kMaxGrammarElements) fail(at, "the repetition expands past the size limit");
    }
    if (hi == kUnbounded) {
      seq s = star(rule, at, a);
      out.insert(out.end(), s.begin(), s.end());
    } else if (hi > lo) {
      // (a (a (a)?)?)?: nested, so each optional copy can only follow the one before it.
      seq inner;
      for (uint32_t i = lo; i < hi; ++i) {
        seq first = a;
        first.insert(first.end(), inner.begin(), inner.end());
        inner = {{element::kind::rule, new_rule(rule, at, {std::move(first), seq{}})}};
      }
      out.insert(out.end(), inner.begin(), inner.end());
    }
    return out;
  }

  std::string_view t_;
  size_t p_ = 0;
  std::vector<byte_set> sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<seq>> alts_;
  std::vector<char> defined_;
  std::vector<size_t> where_;  // offset where each rule is defined (or first used)
  uint32_t generated_ = 0;
  size_t num_elements_ = 0;
};

}  // namespace

grammar parse_gbnf(std::string_view text, std::string_view root) { return gbnf_parser(text).run(root); }

std::string gbnf_literal(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;  // UTF-8 passes through as itself
    }
  }
  out += '"';
  return out;
}

}  // namespace troupe::grammar
