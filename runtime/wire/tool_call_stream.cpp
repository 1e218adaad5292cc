#include "runtime/wire/tool_call_stream.hpp"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

namespace troupe::wire {

namespace {

constexpr std::string_view open_tag = "<tool_call>", close_tag = "</tool_call>";

enum class match { more, ok, no };

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// A small reader over a block's text for the fixed shapes around the arguments.
struct reader {
  std::string_view s;
  size_t i = 0;
  void space() {
    while (i < s.size() && is_space(s[i])) ++i;
  }
  // `lit` next: ok, more (the text ends inside it), no.
  match literal(std::string_view lit) {
    const size_t n = std::min(lit.size(), s.size() - i);
    if (s.compare(i, n, lit, 0, n) != 0) return match::no;
    if (n < lit.size()) return match::more;
    i += n;
    return match::ok;
  }
  // A JSON string next (decoded into `out`).
  match string(std::string& out) {
    if (i >= s.size()) return match::more;
    if (s[i] != '"') return match::no;
    bool esc = false;
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (esc) {
        esc = false;
      } else if (s[j] == '\\') {
        esc = true;
      } else if (s[j] == '"') {
        const auto v = nlohmann::json::parse(s.substr(i, j + 1 - i), nullptr, /*allow_exceptions=*/false);
        if (!v.is_string()) return match::no;
        out = v.get<std::string>();
        i = j + 1;
        return match::ok;
      }
    }
    return match::more;
  }
};

// After <tool_call>: `{"name": "N", "arguments": ` up to the arguments' `{` (at `args_at`).
match header(std::string_view s, std::string& name, size_t& args_at) {
  reader r{s};
  r.space();
  for (auto step : {0, 1, 2, 3, 4, 5, 6}) {
    match m = match::ok;
    switch (step) {
      case 0: m = r.literal("{"); break;
      case 1: m = r.literal("\"name\""); break;
      case 2: m = r.literal(":"); break;
      case 3: m = r.string(name); break;
      case 4: m = r.literal(","); break;
      case 5: m = r.literal("\"arguments\""); break;
      case 6: m = r.literal(":"); break;
    }
    if (m != match::ok) return m;
    r.space();
  }
  if (r.i >= s.size()) return match::more;
  if (s[r.i] != '{') return match::no;  // arguments that are not an object: whole at the end
  args_at = r.i;
  return match::ok;
}

// After the arguments: `}` and </tool_call>, then (blank) the next <tool_call> or the end.
// ok: a next block begins at `next`.
match tail(std::string_view s, size_t& next) {
  reader r{s};
  r.space();
  for (std::string_view lit : {std::string_view("}"), close_tag}) {
    if (auto m = r.literal(lit); m != match::ok) return m;
    r.space();
  }
  if (r.i >= s.size()) return match::more;
  if (auto m = r.literal(open_tag); m != match::ok) return m;
  next = r.i;
  return match::ok;
}

}  // namespace

std::string release_before_calls(std::string& held, bool& in_calls, std::string_view incoming) {
  held += incoming;
  if (in_calls) return {};
  if (auto at = held.find(open_tag); at != std::string::npos) {
    std::string text = held.substr(0, at);
    held.erase(0, at);
    in_calls = true;
    return text;
  }
  // Keep back the longest tail that could begin "<tool_call>".
  size_t keep = 0;
  for (size_t l = std::min(open_tag.size() - 1, held.size()); l > 0; --l)
    if (held.compare(held.size() - l, l, open_tag.substr(0, l)) == 0) {
      keep = l;
      break;
    }
  std::string text = held.substr(0, held.size() - keep);
  held.erase(0, held.size() - keep);
  return text;
}

tool_call_stream::piece tool_call_stream::push(std::string_view text) {
  piece out;
  if (in_calls_) {
    held_ += text;
  } else {
    out.content = release_before_calls(held_, in_calls_, text);
    if (!in_calls_) return out;
    block_ = open_tag.size();  // held_ begins with the tag
  }
  scan(out);
  return out;
}

void tool_call_stream::scan(piece& out) {
  for (;;) {
    if (s_ == state::fallback) return;
    if (s_ == state::head) {
      std::string name;
      size_t args_at = 0;
      const auto m = header(std::string_view(held_).substr(block_), name, args_at);
      if (m == match::more) return;
      if (m == match::no) {
        s_ = state::fallback;
        return;
      }
      out.calls.push_back({args_.size(), true, std::move(name), {}});
      args_.emplace_back();
      s_ = state::arguments;
      pos_ = block_ + args_at;
      depth_ = 0;
      in_string_ = escaped_ = false;
    }
    if (s_ == state::arguments) {
      const size_t from = pos_;
      while (pos_ < held_.size() && s_ == state::arguments) {
        const char c = held_[pos_++];
        if (in_string_) {
          if (escaped_) escaped_ = false;
          else if (c == '\\') escaped_ = true;
          else if (c == '"') in_string_ = false;
        } else if (c == '"') {
          in_string_ = true;
        } else if (c == '{' || c == '[') {
          ++depth_;
        } else if ((c == '}' || c == ']') && --depth_ == 0) {
          s_ = state::tail;
          ++complete_;
        }
      }
      if (pos_ > from) {
        std::string part = held_.substr(from, pos_ - from);
        args_.back() += part;
        if (!out.calls.empty() && out.calls.back().index == args_.size() - 1)
          out.calls.back().arguments += part;
        else
          out.calls.push_back({args_.size() - 1, false, {}, std::move(part)});
      }
      if (s_ == state::arguments) return;
    }
    if (s_ == state::tail) {
      size_t next = 0;
      const auto m = tail(std::string_view(held_).substr(pos_), next);
      if (m == match::more) return;
      if (m == match::no) {  // text after the calls, or a block shaped otherwise: whole at the end
        s_ = state::fallback;
        return;
      }
      block_ = pos_ + next;
      s_ = state::head;
    }
  }
}

call_holder::call_holder(mode m) : m_(m), in_calls_(m == mode::hold_all) {
  if (m == mode::stream) calls_.emplace();
}

tool_call_stream::piece call_holder::push(std::string_view text) {
  if (calls_) return calls_->push(text);
  tool_call_stream::piece out;
  if (m_ == mode::pass) out.content = std::string(text);
  else out.content = release_before_calls(held_, in_calls_, text);
  return out;
}

std::string call_holder::take_held() {
  if (calls_) return calls_->held();  // the stream ended: nothing is pushed after
  return std::exchange(held_, {});
}

}  // namespace troupe::wire
