// Pre-tokenisation: splitting normalised text into the pieces BPE runs on. The Qwen2/Qwen3
// pattern of tokenizer.json's Split step is implemented by hand (qwen_split: one pass, linear
// time, no regex engine); any other pattern runs through PCRE2 (regex_splitter).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/unicode_props.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

// The Split regex of Qwen2, Qwen2.5 and Qwen3 (tokenizer.json, behaviour Isolated).
inline constexpr std::string_view qwen_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace detail {

inline constexpr uint8_t ascii_flag(unsigned c) {
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return cp_letter;
  if (c >= '0' && c <= '9') return cp_number;
  if ((c >= 0x09 && c <= 0x0D) || c == ' ') return cp_space;
  return 0;
}

struct char_info {
  uint8_t flags;
  int len;
};

inline char_info info_at(const unsigned char* p, const unicode_props& props) {
  static constexpr auto table = [] {
    struct t { uint8_t v[128]; } r{};
    for (unsigned c = 0; c < 128; ++c) r.v[c] = ascii_flag(c);
    return r;
  }();
  if (p[0] < 0x80) return {table.v[p[0]], 1};
  char32_t cp;
  int len = decode_utf8(p, cp);
  return {props.flags(cp), len};
}

inline constexpr uint8_t cp_lns = cp_letter | cp_number | cp_space;

}  // namespace detail

// Calls emit(offset, length) for each piece of valid UTF-8 `text`, exactly as the regex
// qwen_pattern splits it (leftmost alternative first, with its greedy backtracking resolved
// analytically; see docs/tokenizer.md). Each piece takes O(its length), except whitespace
// runs, which are scanned at most twice.
template <class Emit>
void qwen_split(std::string_view text, Emit&& emit) {
  using detail::char_info;
  using detail::cp_lns;
  using detail::info_at;
  const unicode_props& props = unicode_props::get();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  auto letters_from = [&](size_t j) {
    while (j < n) {
      char_info ci = info_at(p + j, props);
      if (!(ci.flags & cp_letter)) break;
      j += static_cast<size_t>(ci.len);
    }
    return j;
  };
  auto is_other = [](uint8_t f) { return (f & cp_lns) == 0; };
  while (i < n) {
    const unsigned c = p[i];
    // (?i:'s|'t|'re|'ve|'m|'ll|'d); case folding also maps U+017F (long s) to s.
    if (c == '\'' && i + 1 < n) {
      unsigned c1 = p[i + 1] | 0x20;
      size_t m = 0;
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
        m = 2;
      } else if (i + 2 < n) {
        unsigned c2 = p[i + 2] | 0x20;
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) m = 3;
        if (p[i + 1] == 0xC5 && p[i + 2] == 0xBF) m = 3;
      }
      if (m) {
        emit(i, m);
        i += m;
        continue;
      }
    }
    const char_info c0 = info_at(p + i, props);
    const size_t after0 = i + static_cast<size_t>(c0.len);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c0.flags & cp_letter) {
      size_t j = letters_from(after0);
      emit(i, j - i);
      i = j;
      continue;
    }
    const bool newline0 = c == '\r' || c == '\n';
    if (!(c0.flags & cp_number) && !newline0 && after0 < n) {
      char_info c1 = info_at(p + after0, props);
      if (c1.flags & cp_letter) {
        size_t j = letters_from(after0 + static_cast<size_t>(c1.len));
        emit(i, j - i);
        i = j;
        continue;
      }
    }
    // \p{N}
    if (c0.flags & cp_number) {
      emit(i, static_cast<size_t>(c0.len));
      i = after0;
      continue;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    if (is_other(c0.flags) || (c == ' ' && after0 < n && is_other(info_at(p + after0, props).flags))) {
      size_t j = after0;
      while (j < n) {
        char_info cj = info_at(p + j, props);
        if (!is_other(cj.flags)) break;
        j += static_cast<size_t>(cj.len);
      }
      while (j < n && (p[j] == '\r' || p[j] == '\n')) ++j;
      emit(i, j - i);
      i = j;
      continue;
    }
    // c0 is white space: \s*[\r\n]+ | \s+(?!\S) | \s+
    size_t j = i;
    size_t last_newline = npos;
    size_t last_start = i;
    size_t count = 0;
    while (j < n) {
      char_info cj = info_at(p + j, props);
      if (!(cj.flags & cp_space)) break;
      if (p[j] == '\r' || p[j] == '\n') last_newline = j;
      last_start = j;
      j += static_cast<size_t>(cj.len);
      ++count;
    }
    size_t end;
    if (last_newline != npos) {
      end = last_newline + 1;  // \s* backtracks to the last newline of the run
    } else if (j == n || count < 2) {
      end = j;  // the run ends the text, or a single space before a non-space
    } else {
      end = last_start;  // leave the last space to prefix the next word
    }
    emit(i, end - i);
    i = end;
  }
}

// Any other Split pattern, through PCRE2 (UTF + UCP, JIT), behaviour Isolated: matches and the
// text between them both become pieces.
class regex_splitter {
 public:
  explicit regex_splitter(const std::string& pattern);  // throws errc::unsupported
  ~regex_splitter();
  regex_splitter(const regex_splitter&) = delete;
  regex_splitter& operator=(const regex_splitter&) = delete;

  // Appends {offset, length} pairs for valid UTF-8 `text`.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::tok
