// The model's chat template, run by Troupe's Jinja-subset engine (runtime/tokenizer/jinja/).
//
// Decision: interpret the template text from the model directory instead of hand-writing
// Qwen3's rendering. The text is the contract transformers renders; running it keeps Troupe
// right for fine-tunes and later Qwen releases that edit the template (Qwen3-2507 dropped
// thinking, Qwen3-Coder changed tool calls) without a code change, where a hand-written
// renderer would silently keep the old format. Anything outside the subset fails when the
// template is loaded, naming the line, never by rendering something different.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace troupe {

namespace jinja {
struct stmt;
}

struct chat_request {
  // Message objects ({"role", "content", "reasoning_content"?, "tool_calls"?, ...}). Ordered
  // JSON keeps the key order tojson prints, as Python dicts do; a plain nlohmann::json converts
  // implicitly but has its keys sorted, which changes how tools and tool-call arguments print.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools (the template sees None)
  bool add_generation_prompt = false;
  // The model continues the final message (assistant prefill): render_continuing. Not with
  // add_generation_prompt.
  bool continue_final_message = false;
  // Further template variables, e.g. {"enable_thinking": false}.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class chat_template {
 public:
  // Reads chat_template.jinja if present, else "chat_template" of tokenizer_config.json (the
  // "default" entry when it is a list), plus the special tokens (eos_token, ...) transformers
  // passes to the template. Throws troupe::error: io_error, invalid_checkpoint, or unsupported
  // for a template outside the Jinja subset.
  // `override_template` (vLLM's --chat-template): a file holding a template, or the template
  // itself (text with "{{" or "{%"), used instead of the directory's; the special tokens still
  // come from the directory. "" = the directory's.
  static chat_template from_directory(const std::string& model_dir, const std::string& override_template = "");

  // `special_tokens`: variables such as {"eos_token": "<|im_end|>"}.
  explicit chat_template(std::string source,
                         nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());

  // Throws troupe::error(invalid_input) when the conversation is malformed for the template
  // (a missing field it reads, raise_exception(), ...), with the template line.
  std::string render(const chat_request& request) const;
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // The chat rendered so that the model continues its final message (transformers'
  // continue_final_message, which vLLM's is): the final message's content gets a marker, the chat
  // is rendered without a generation prompt, and the text is cut at the marker (and right-trimmed
  // where the template trimmed the content's trailing white space). Throws invalid_input when
  // there is no final message, it has no string content, or the template does not print it whole.
  std::string render_continuing(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  std::string source_;
  nlohmann::ordered_json special_tokens_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::stmt>>> program_;
};

}  // namespace troupe
