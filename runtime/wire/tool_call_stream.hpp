// Qwen3's tool calls as they stream (vLLM's hermes parser, streaming): text before the first
// <tool_call> is content, sent as it comes (what could begin the tag held back); inside a block
// {"name": "...", "arguments": {...}} the call is announced once its name is whole, and its
// arguments object streams as the model writes it, so a client sees a long argument (a file's
// content, a patch) arrive piece by piece instead of all at the end. A block shaped otherwise
// (arguments before the name, arguments that are not an object) streams nothing: the response's
// done event carries its call whole, as before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::wire {

// Streaming with tools: `incoming` text joins `held`; what cannot be part of a <tool_call> block
// comes back to be sent now. From the block's start on everything stays held (`in_calls` set),
// for the done event to turn into tool calls (or tool_call_stream to stream).
std::string release_before_calls(std::string& held, bool& in_calls, std::string_view incoming);

class tool_call_stream {
 public:
  struct call_piece {
    size_t index = 0;       // the call's position among the calls streamed
    bool begins = false;    // the call's first piece: `name` is set
    std::string name;
    std::string arguments;  // the next part of its arguments' JSON text
  };
  struct piece {
    std::string content;            // text to send as content now
    std::vector<call_piece> calls;  // call pieces to send now
  };

  piece push(std::string_view text);

  // Calls whose arguments streamed whole (their JSON text: arguments(k)); calls begun but cut
  // short are counted by begun().
  size_t complete() const noexcept { return complete_; }
  size_t begun() const noexcept { return args_.size(); }
  const std::string& arguments(size_t k) const { return args_[k]; }
  // Everything held since the first <tool_call> (or a tail that may begin one): the done event
  // decides what it was.
  const std::string& held() const noexcept { return held_; }
  bool in_calls() const noexcept { return in_calls_; }

 private:
  enum class state : uint8_t { head, arguments, tail, fallback };
  void scan(piece& out);

  std::string held_;    // from the first <tool_call> on (or a possible tag's start)
  size_t pos_ = 0;      // how far scan() has read into held_
  bool in_calls_ = false;
  state s_ = state::head;
  size_t block_ = 0;    // where the current block's body starts in held_
  // In the arguments: JSON nesting depth, inside a string, after a backslash.
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  std::vector<std::string> args_;
  size_t complete_ = 0;
};

// What a streamed reply (chat, Responses, Anthropic's Messages) holds back of the model's text
// as possibly tool calls, the one place each of them asks:
// - pass: no tools: every text goes out as it comes;
// - hold: text from the first <tool_call> on (or a tail that may begin one) is held for the done
//   event to judge (release_before_calls);
// - hold_all: a forced call's output is all call: everything is held;
// - stream: each call's arguments stream as the model writes them (tool_call_stream).
class call_holder {
 public:
  enum class mode : uint8_t { pass, hold, hold_all, stream };
  // The mode a streamed reply takes: tools offered, a forced call, arguments streamable.
  static mode for_reply(bool has_tools, bool forced, bool stream_arguments) noexcept {
    return forced ? mode::hold_all : !has_tools ? mode::pass : stream_arguments ? mode::stream : mode::hold;
  }
  explicit call_holder(mode m = mode::pass);

  // The next text of the model's output: what to send now as text, and (stream) call pieces.
  tool_call_stream::piece push(std::string_view text);
  // What is held back now, taken out (the done event decides what it was).
  std::string take_held();
  // Calls streamed piece by piece (stream mode; 0 otherwise), and of them those whose arguments
  // closed.
  size_t streamed() const noexcept { return calls_ ? calls_->begun() : 0; }
  size_t complete() const noexcept { return calls_ ? calls_->complete() : 0; }
  bool streams_calls() const noexcept { return calls_.has_value(); }

 private:
  mode m_;
  std::string held_;
  bool in_calls_ = false;
  std::optional<tool_call_stream> calls_;
};

}  // namespace troupe::wire
