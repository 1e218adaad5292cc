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

std::string_view json_scanner::read_string_slow(size_t start, size_t i, std::string& scratch) {
  const char* s = text_.data();
  const size_t n = text_.size();
  if (i >= n) {
    pos_ = start - 1;
    fail("a closed string");
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
