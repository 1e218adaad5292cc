// vLLM's POST /tokenize and POST /detokenize beside the OpenAI API (docs/openai_api.md): a text
// or chat messages become the protocol's tokenize request (the same strict decoder, the same
// tokenizer worker and chat template as a generate), and token ids become text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/openai.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::wire::openai {

struct tokenize_call {
  std::optional<tokenize_request> req;  // set on success
  api_error error;
  bool token_strs = false;  // return_token_strs: each token's vocabulary string too
  bool ok() const noexcept { return req.has_value(); }
};

// `id` becomes the tokenize request's id. Never throws.
tokenize_call parse_tokenize(std::string_view body, const served_models& models, const std::string& id);

// {"count", "max_model_len", "tokens", "token_strs"}: token_strs null unless given.
std::string tokenize_body(const std::vector<int32_t>& ids, int64_t max_model_len,
                          const std::vector<std::string>* token_strs);

struct detokenize_call {
  std::optional<std::vector<int32_t>> ids;  // set on success
  api_error error;
  bool ok() const noexcept { return ids.has_value(); }
};

// {"tokens": [ids], "model"?}; ids are checked against the tokenizer by the caller. Never throws.
detokenize_call parse_detokenize(std::string_view body, const served_models& models);

// {"prompt": text} (vLLM's field name).
std::string detokenize_body(const std::string& text);

}  // namespace troupe::wire::openai
