// Requests between msgpack bytes and protocol.hpp structs. Decoding is strict and total: every
// payload yields either a request or a wire_error whose message names the offending field and
// what was expected; it never throws and never trusts a length it has not checked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/wire/protocol.hpp"

namespace troupe::wire {

struct decoded_request {
  std::optional<request> req;  // set on success
  wire_error error;            // set on failure (error.id holds the id when it was readable)
  bool ok() const noexcept { return req.has_value(); }
};

// Limits a decoder applies beyond the frame size (documented in docs/protocol.md).
inline constexpr size_t max_id_bytes = 128;
inline constexpr size_t max_tenant_bytes = 128;
inline constexpr size_t max_adapter_name_bytes = 128;
inline constexpr size_t max_cache_salt_bytes = 1024;
inline constexpr size_t max_chat_template_bytes = 256 * 1024;
// chat_template_kwargs keys that are not a template's switches: the request's own fields set
// these variables (enable_thinking has a field of its own).
inline constexpr std::string_view reserved_template_variables[] = {
    "messages", "tools", "documents", "add_generation_prompt", "continue_final_message", "enable_thinking"};
inline bool is_reserved_template_variable(std::string_view name) noexcept {
  for (std::string_view r : reserved_template_variables)
    if (r == name) return true;
  return false;
}
inline constexpr size_t max_stop_strings = 16;
inline constexpr size_t max_stop_string_bytes = 256;
inline constexpr size_t max_stop_ids = 64;
inline constexpr size_t max_tools = 128;
inline constexpr size_t max_logit_bias = 1024;            // entries of logit_bias
inline constexpr size_t max_choices = 1024;               // structured_outputs.choice entries
inline constexpr size_t max_choice_bytes = 4096;          // each choice
inline constexpr size_t max_bad_words = 64;                // entries of bad_words, each 1..256 bytes
inline constexpr size_t max_allowed_token_ids = 262144;    // entries of allowed_token_ids
inline constexpr int64_t max_logprobs = 20;               // top alternatives per token
inline constexpr int64_t max_n = 128;                     // completions of one generate (OpenAI's bound)
inline constexpr int64_t max_beam_width = 10;             // n with use_beam_search: 2n top logprobs a beam
inline constexpr size_t max_embed_inputs = max_n;         // inputs of one embed (each is a sequence, as n)
inline constexpr size_t max_policy_bytes = 4096;          // set_policy.policy (a name or a path)
inline constexpr size_t max_policy_config_bytes = 65536;  // set_policy.config
inline constexpr size_t max_admin_token_bytes = 256;

// `payload` is one frame's bytes (without the length prefix).
decoded_request decode_request(std::string_view payload);

// The client side: the payload for `r` (fields that hold their default are left out).
std::string encode_request(const request& r);

// The `id` field of any request ("" when it has none).
const std::string& request_id(const request& r) noexcept;
std::string_view request_type(const request& r) noexcept;

}  // namespace troupe::wire
