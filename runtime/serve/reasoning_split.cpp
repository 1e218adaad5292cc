#include "runtime/serve/reasoning_split.hpp"

#include <algorithm>

namespace troupe::serve {

namespace {

constexpr std::string_view open_tag = "<think>";
constexpr std::string_view close_tag = "</think>";

// The length of the longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tag_tail(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

void drop_leading_newlines(std::string& s) { s.erase(0, std::min(s.find_first_not_of('\n'), s.size())); }

}  // namespace

reasoning_split::reasoning_split(bool opened_in_prompt)
    : state_(opened_in_prompt ? state::reasoning : state::expect_open), strip_leading_newlines_(opened_in_prompt) {}

reasoning_split::parts reasoning_split::push(std::string_view text) {
  parts out;
  held_ += text;
  for (;;) {
    switch (state_) {
      case state::expect_open:
        if (held_.starts_with(open_tag)) {
          held_.erase(0, open_tag.size());
          state_ = state::reasoning;
          strip_leading_newlines_ = true;
          continue;
        }
        if (open_tag.starts_with(held_)) return out;  // "", "<", "<th", ...: may still open
        state_ = state::content;
        continue;
      case state::reasoning: {
        if (strip_leading_newlines_) {
          drop_leading_newlines(held_);
          if (held_.empty()) return out;
          strip_leading_newlines_ = false;
        }
        const size_t close = held_.find(close_tag);
        if (close != std::string::npos) {
          std::string_view r(held_.data(), close);
          while (!r.empty() && r.back() == '\n') r.remove_suffix(1);
          out.reasoning.append(r);
          held_.erase(0, close + close_tag.size());
          state_ = state::content;
          strip_leading_newlines_ = true;
          continue;
        }
        // Keep a possible start of "</think>" and the newlines before it.
        size_t keep_from = held_.size() - partial_tag_tail(held_, close_tag);
        while (keep_from > 0 && held_[keep_from - 1] == '\n') --keep_from;
        out.reasoning.append(held_, 0, keep_from);
        held_.erase(0, keep_from);
        return out;
      }
      case state::content:
        if (strip_leading_newlines_) {
          drop_leading_newlines(held_);
          if (held_.empty()) return out;
          strip_leading_newlines_ = false;
        }
        out.content += held_;
        held_.clear();
        return out;
    }
  }
}

reasoning_split::parts reasoning_split::finish() {
  parts out;
  if (state_ == state::reasoning) {
    while (!held_.empty() && held_.back() == '\n') held_.pop_back();
    out.reasoning.swap(held_);
  } else if (state_ == state::expect_open) {
    out.content.swap(held_);  // "<thi" and the output ended: it was text
  }
  held_.clear();  // content: only newlines after "</think>" can be held
  return out;
}

namespace {
// Whether the prompt's text ends with `tag`, white space after it aside.
bool prompt_ends_with_tag(const tokenizer& tok, std::span<const int32_t> prompt, std::string_view tag) {
  // "<think>" is one token in Qwen3's vocabulary; a few ids cover it spelt out in pieces too.
  const size_t n = std::min<size_t>(prompt.size(), 8);
  std::string tail;
  try {
    tail = tok.decode(prompt.subspan(prompt.size() - n));
  } catch (const std::exception&) {
    return false;  // ids the tokenizer does not know (padded rows): no text, no tag
  }
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ' || tail.back() == '\t' || tail.back() == '\r'))
    tail.pop_back();
  return std::string_view(tail).ends_with(tag);
}
}  // namespace

bool prompt_opens_reasoning(const tokenizer& tok, std::span<const int32_t> prompt) {
  return prompt_ends_with_tag(tok, prompt, open_tag);
}

bool prompt_closes_reasoning(const tokenizer& tok, std::span<const int32_t> prompt) {
  return prompt_ends_with_tag(tok, prompt, close_tag);
}

}  // namespace troupe::serve
