// JSON pull scanner (see json_scan.hpp). Strict RFC 8259 strings; numbers only as integers
// where read_int() is used. Nesting in skip_value() is bounded so hostile files cannot blow
// the stack.
#include "runtime/tokenizer/json_scan.hpp"

#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

namespace {
constexpr int max_depth = 512;

// SWAR tests on eight bytes at once (the file is 11 MB, mostly short strings and indentation).
constexpr uint64_t ones = 0x0101010101010101ULL;
constexpr uint64_t highs = 0x8080808080808080ULL;
inline uint64_t has_zero(uint64_t v) { return (v - ones) & ~v & highs; }
inline uint64_t has_byte(uint64_t w, unsigned char c) { return has_zero(w ^ (ones * c)); }
// A byte that ends a string's plain run: '"', '\\' or a control character (< 0x20).
inline bool plain8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  uint64_t below_space = (w - ones * 0x20) & ~w & highs;
  return (has_byte(w, '"') | has_byte(w, '\\') | below_space) == 0;
}
// Eight bytes of indentation: all spaces.
inline bool spaces8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w == ones * ' ';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}
}  // namespace

void json_scanner::fail(const std::string& expected) const {
  std::string got = pos_ < text_.size() ? std::string(text_.substr(pos_, 16)) : std::string("end of file");
  throw_error(errc::invalid_checkpoint,
              what_ + ": at byte " + std::to_string(pos_) + ": expected " + expected + ", found '" + got + "'");
}

void json_scanner::skip_ws() {
  while (pos_ + 8 <= text_.size() && spaces8(text_.data() + pos_)) pos_ += 8;
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    ++pos_;
  }
}

char json_scanner::peek() {
  skip_ws();
  return pos_ < text_.size() ? text_[pos_] : '\0';
}

bool json_scanner::at_end() { return peek() == '\0' && pos_ >= text_.size(); }

void json_scanner::expect(char c) {
  if (peek() != c) fail(std::string("'") + c + "'");
  ++pos_;
}

bool json_scanner::close_or_comma(char close) {
  char c = peek();
  if (first_) {
    first_ = false;
    if (c == close) {
      ++pos_;
      return false;
    }
    return true;
  }
  if (c == close) {
    ++pos_;
    return false;
  }
  if (c != ',') fail(std::string("',' or '") + close + "'");
  ++pos_;
  return true;
}

bool json_scanner::next_member(std::string_view& key, std::string& scratch) {
  if (!close_or_comma('}')) return false;
  key = read_string(scratch);
  expect(':');
  return true;
}

bool json_scanner::next_element() { return close_or_comma(']'); }

std::string_view json_scanner::read_string(std::string& scratch) {
  if (peek() != '"') fail("a string");
  size_t start = ++pos_;
  const char* s = text_.data();
  const size_t n = text_.size();
  size_t i = start;
  while (i + 8 <= n && plain8(s + i)) i += 8;
  while (i < n && s[i] != '"' && s[i] != '\\') {
    if (static_cast<unsigned char>(s[i]) < 0x20) {
      pos_ = i;
      fail("no raw control character inside a string");
    }
    ++i;
  }
  if (i >= n) {
    pos_ = start - 1;
    fail("a closed string");
  }
  if (s[i] == '"') {
    pos_ = i + 1;
    return text_.substr(start, i - start);
  }
  scratch.assign(s + start, i - start);
  while (true) {
    if (i >= n) {
      pos_ = start - 1;
      fail("a closed string");
    }
    char c = s[i];
    if (c == '"') break;
    if (static_cast<unsigned char>(c) < 0x20) {
      pos_ = i;
      fail("no raw control character inside a string");
    }
    if (c != '\\') {
      scratch.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= n) {
      pos_ = i;
      fail("an escape sequence");
    }
    char e = s[i + 1];
    i += 2;
    switch (e) {
      case '"': scratch.push_back('"'); break;
      case '\\': scratch.push_back('\\'); break;
      case '/': scratch.push_back('/'); break;
      case 'b': scratch.push_back('\b'); break;
      case 'f': scratch.push_back('\f'); break;
      case 'n': scratch.push_back('\n'); break;
      case 'r': scratch.push_back('\r'); break;
      case 't': scratch.push_back('\t'); break;
      case 'u': {
        auto hex4 = [&](size_t at) -> int {
          if (at + 4 > n) return -1;
          int v = 0;
          for (size_t k = 0; k < 4; ++k) {
            int h = hex_value(s[at + k]);
            if (h < 0) return -1;
            v = v * 16 + h;
          }
          return v;
        };
        int u = hex4(i);
        if (u < 0) {
          pos_ = i - 2;
          fail("four hex digits after \\u");
        }
        i += 4;
        char32_t cp = static_cast<char32_t>(u);
        if (u >= 0xD800 && u <= 0xDBFF) {
          int lo = (i + 1 < n && s[i] == '\\' && s[i + 1] == 'u') ? hex4(i + 2) : -1;
          if (lo < 0xDC00 || lo > 0xDFFF) {
            pos_ = i - 6;
            fail("a low surrogate after a high surrogate escape");
          }
          cp = 0x10000 + ((static_cast<char32_t>(u) - 0xD800) << 10) + (static_cast<char32_t>(lo) - 0xDC00);
          i += 6;
        } else if (u >= 0xDC00 && u <= 0xDFFF) {
          pos_ = i - 6;
          fail("no lone low surrogate escape");
        }
        append_utf8(scratch, cp);
        break;
      }
      default:
        pos_ = i - 2;
        fail("a valid escape sequence");
    }
  }
  pos_ = i + 1;
  return scratch;
}

int64_t json_scanner::read_int() {
  peek();
  const size_t start = pos_;
  bool neg = false;
  if (pos_ < text_.size() && text_[pos_] == '-') {
    neg = true;
    ++pos_;
  }
  int64_t v = 0;
  size_t digits = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    if (v > (INT64_MAX - 9) / 10) {
      pos_ = start;
      fail("an integer that fits 64 bits");
    }
    v = v * 10 + (text_[pos_++] - '0');
    ++digits;
  }
  char next = pos_ < text_.size() ? text_[pos_] : '\0';
  if (digits == 0 || next == '.' || next == 'e' || next == 'E') {
    pos_ = start;
    fail("an integer");
  }
  return neg ? -v : v;
}

void json_scanner::skip_string() {
  std::string scratch;
  read_string(scratch);
}

std::string_view json_scanner::skip_value() {
  char c = peek();
  const size_t start = pos_;
  if (c == '"') {
    skip_string();
  } else if (c == '{' || c == '[') {
    int depth = 0;
    while (true) {
      char d = peek();
      if (d == '"') {
        skip_string();
        continue;
      }
      if (d == '\0') fail("the end of a nested value");
      ++pos_;
      if (d == '{' || d == '[') {
        if (++depth > max_depth) fail("nesting shallower than 512 levels");
      } else if (d == '}' || d == ']') {
        if (--depth == 0) break;
      }
    }
  } else {
    // A scalar: number, true, false, null. nlohmann::json validates it later.
    while (pos_ < text_.size()) {
      char d = text_[pos_];
      if (d == ',' || d == '}' || d == ']' || d == ' ' || d == '\n' || d == '\r' || d == '\t') break;
      ++pos_;
    }
    if (pos_ == start) fail("a value");
  }
  return text_.substr(start, pos_ - start);
}

}  // namespace troupe::tok
