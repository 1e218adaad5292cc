// Jinja lexer (see lexer.hpp). Follows jinja2/lexer.py: tags are found by their openers,
// '{{-'/'{%-' strip all white space before the tag, lstrip_blocks strips spaces and tabs from a
// line's start up to a block tag, '-}}'/'-%}' strip all white space after, trim_blocks removes
// one newline after a block tag; inside a tag, braces are balanced so '}}' of a nested dict
// literal does not close it.
#include "runtime/tokenizer/jinja/lexer.hpp"

#include <cctype>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw_error(errc::unsupported, "chat template line " + std::to_string(line) + ": " + what);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's unicode-escape decoding of a string literal body (Jinja2 does the same).
std::string unescape(std::string_view s, int line) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&](size_t at, size_t n) -> long {
    if (at + n > s.size()) return -1;
    long v = 0;
    for (size_t k = 0; k < n; ++k) {
      char c = s[at + k];
      int h = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
              : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                       : -1;
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    return v;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out.push_back(c);
      continue;
    }
    char e = s[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        long v = hex(i + 1, n);
        if (v < 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) fail(line, "bad \\" + std::string(1, e) + " escape in a string");
        tok::append_utf8(out, static_cast<char32_t>(v));
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {  // up to three octal digits
          int v = e - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) v = v * 8 + (s[++i] - '0');
          tok::append_utf8(out, static_cast<char32_t>(v));
        } else {  // unknown escapes keep their backslash
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class lexer {
 public:
  lexer(std::string_view src, const lexer_options& opt) : opt_(opt) {
    // Newlines normalised to \n, then one trailing newline dropped.
    src_.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      } else {
        src_.push_back(src[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t k = find_tag(pos);
      std::string text = src_.substr(pos, (k == std::string::npos ? src_.size() : k) - pos);
      if (k == std::string::npos) {
        emit_text(text, line_of(pos));
        break;
      }
      char kind = src_[k + 1];  // '{', '%' or '#'
      char sign = k + 2 < src_.size() ? src_[k + 2] : '\0';
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && kind != '{' && opt_.lstrip_blocks) {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size() && blank; ++i) blank = is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(text, line_of(pos));
      size_t body = k + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      size_t after;
      bool strip_after = false;
      bool keep_newline = false;
      if (kind == '#') {
        size_t close = src_.find("#}", body);
        if (close == std::string::npos) fail(line_of(k), "comment without '#}'");
        strip_after = close > body && src_[close - 1] == '-';
        keep_newline = close > body && src_[close - 1] == '+';
        after = close + 2;
      } else {
        int line = line_of(k);
        tokens_.push_back({kind == '{' ? token_kind::var_begin : token_kind::block_begin, "", line});
        after = lex_tag(body, kind == '{' ? '}' : '%', strip_after, keep_newline);
        tokens_.push_back({kind == '{' ? token_kind::var_end : token_kind::block_end, "", line_of(after - 1)});
      }
      if (strip_after) {
        while (after < src_.size() && is_space(src_[after])) ++after;
      } else if (kind != '{' && opt_.trim_blocks && !keep_newline && after < src_.size() && src_[after] == '\n') {
        ++after;
      }
      line_starting = after > 0 && src_[after - 1] == '\n';
      pos = after;
    }
    tokens_.push_back({token_kind::end, "", line_of(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  int line_of(size_t pos) {
    // Incremental: positions are asked for in increasing order (almost always).
    if (pos < line_pos_) {
      line_pos_ = 0;
      line_ = 1;
    }
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_;
    return line_;
  }

  void emit_text(const std::string& text, int line) {
    if (!text.empty()) tokens_.push_back({token_kind::text, text, line});
  }

  // Lexes expression tokens from `i` up to the closing "}}" / "%}" (with optional '-'/'+'),
  // returning the index after it.
  size_t lex_tag(size_t i, char closer, bool& strip_after, bool& keep_newline) {
    int depth = 0;
    const int line = line_of(i);
    while (true) {
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (i >= src_.size()) fail(line, std::string("tag without '") + closer + "}'");
      char c = src_[i];
      if (depth == 0) {
        if ((c == '-' || c == '+') && i + 2 < src_.size() + 0 && src_[i + 1] == closer && src_[i + 2] == '}') {
          strip_after = c == '-';
          keep_newline = c == '+';
          return i + 3;
        }
        if (c == closer && i + 1 < src_.size() && src_[i + 1] == '}') return i + 2;
      }
      int tline = line_of(i);
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
        tokens_.push_back({token_kind::name, src_.substr(i, j - i), tline});
        i = j;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t j = i;
        while (j < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
        bool is_float = false;
        if (j + 1 < src_.size() && src_[j] == '.' && std::isdigit(static_cast<unsigned char>(src_[j + 1]))) {
          is_float = true;
          ++j;
          while (j < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
        }
        if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
          size_t m = j + 1;
          if (m < src_.size() && (src_[m] == '+' || src_[m] == '-')) ++m;
          if (m < src_.size() && std::isdigit(static_cast<unsigned char>(src_[m]))) {
            is_float = true;
            j = m;
            while (j < src_.size() && std::isdigit(static_cast<unsigned char>(src_[j]))) ++j;
          }
        }
        std::string num;
        for (size_t q = i; q < j; ++q)
          if (src_[q] != '_') num.push_back(src_[q]);
        tokens_.push_back({is_float ? token_kind::floating : token_kind::integer, num, tline});
        i = j;
      } else if (c == '\'' || c == '"') {
        size_t j = i + 1;
        while (j < src_.size() && src_[j] != c) j += src_[j] == '\\' ? 2 : 1;
        if (j >= src_.size()) fail(tline, "unterminated string literal");
        tokens_.push_back({token_kind::string, unescape(std::string_view(src_).substr(i + 1, j - i - 1), tline), tline});
        i = j + 1;
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two)
          if (src_.compare(i, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
            fail(tline, std::string("unexpected character '") + c + "' in a tag");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
        tokens_.push_back({token_kind::op, op, tline});
        i += op.size();
      }
    }
  }

  std::string src_;
  lexer_options opt_;
  std::vector<token> tokens_;
  size_t line_pos_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<token> lex(std::string_view source, const lexer_options& opt) { return lexer(source, opt).run(); }

}  // namespace troupe::jinja
