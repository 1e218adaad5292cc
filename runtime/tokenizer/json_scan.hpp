// A minimal pull scanner over JSON text, for the two big sections of tokenizer.json (vocab and
// merges) that nlohmann::json parses too slowly for the load-time target (~0.4 s for the 11 MB
// Qwen3 file). Everything else is sliced out with skip_value() and handed to nlohmann::json.
// The per-token steps are inline: loading calls them ~1.5 million times.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace troupe::tok {

class json_scanner {
 public:
  // `what` names the source in error messages (a file path).
  json_scanner(std::string_view text, std::string what) : text_(text), what_(std::move(what)) {}

  char peek() {  // next non-space character, '\0' at the end
    skip_ws();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("'") + c + "'");
    ++pos_;
  }
  bool at_end() { return peek() == '\0' && pos_ >= text_.size(); }

  // Objects: begin_object(), then next_member(key) until it returns false.
  void begin_object() {
    expect('{');
    first_ = true;
  }
  bool next_member(std::string_view& key, std::string& scratch) {
    if (!close_or_comma('}')) return false;
    key = read_string(scratch);
    expect(':');
    return true;
  }
  // Arrays: begin_array(), then next_element() until it returns false.
  void begin_array() {
    expect('[');
    first_ = true;
  }
  bool next_element() { return close_or_comma(']'); }

  // A string value; views the input when it has no escapes, else decodes into `scratch`.
  std::string_view read_string(std::string& scratch) {
    if (peek() != '"') fail("a string");
    const size_t start = ++pos_;
    const char* s = text_.data();
    const size_t n = text_.size();
    size_t i = start;
    while (i < n) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"') {
        pos_ = i + 1;
        return text_.substr(start, i - start);
      }
      if (c == '\\' || c < 0x20) break;
      ++i;
    }
    return read_string_slow(start, i, scratch);
  }
  int64_t read_int() {
    peek();
    const size_t start = pos_;
    const bool neg = pos_ < text_.size() && text_[pos_] == '-';
    if (neg) ++pos_;
    int64_t v = 0;
    size_t digits = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9' && digits < 18) {
      v = v * 10 + (text_[pos_++] - '0');
      ++digits;
    }
    const char next = pos_ < text_.size() ? text_[pos_] : '\0';
    if (digits == 0 || next == '.' || next == 'e' || next == 'E' || (next >= '0' && next <= '9')) {
      pos_ = start;
      fail(digits == 18 ? "an integer below 10^18" : "an integer");
    }
    return neg ? -v : v;
  }
  // Skips one value of any kind and returns its text.
  std::string_view skip_value();

  size_t offset() const { return pos_; }
  [[noreturn]] void fail(const std::string& expected) const;

 private:
  void skip_ws() {
    const char* s = text_.data();
    const size_t n = text_.size();
    while (pos_ < n) {
      const char c = s[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++pos_;
    }
  }
  void skip_string() {
    std::string scratch;
    read_string(scratch);
  }
  // Escapes or a bad character in a string: decoded here, out of line.
  std::string_view read_string_slow(size_t start, size_t i, std::string& scratch);
  bool close_or_comma(char close) {
    const char c = peek();
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

  std::string_view text_;
  std::string what_;
  size_t pos_ = 0;
  bool first_ = true;
};

}  // namespace troupe::tok
