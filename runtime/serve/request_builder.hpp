// Turns a decoded wire request into what the scheduler and the sampler need: prompt ids (from
// text, chat messages or ids), sampling params completed from the model's defaults, the stop ids
// (EOS unless ignore_eos, plus the request's), and max_tokens. Refusals are wire errors.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine/embedding.hpp"
#include "runtime/grammar/automaton_cache.hpp"
#include "runtime/model/config.hpp"
#include "runtime/serve/adapter_registry.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/sampling/sampler.hpp"
#include "runtime/serve/rerank.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/wire/protocol.hpp"

namespace troupe::serve {

// How a chat becomes a prompt (the request's fields; wire::generate_request).
struct chat_options {
  bool enable_thinking = true;
  bool add_generation_prompt = true;    // the assistant's turn opened for the model
  bool continue_final_message = false;  // instead, the model continues the final message
  // The request's chat_template_kwargs (a JSON object's text; "" = none): template variables,
  // over the server's defaults (make_chat_renderer).
  std::string kwargs_json = {};
  // The request's own chat template (Jinja text; "" = the server's): the renderer compiles it
  // (keeping the last few) with the model's special tokens.
  std::string_view template_text = {};
};
// tools_json: "" or a JSON array of tool definitions (wire::generate_request::tools_json).
using chat_renderer = std::function<std::string(const std::vector<wire::chat_message>&,
                                                const std::string& tools_json, const chat_options&)>;

struct model_facts {
  std::string name;
  std::vector<std::string> aliases;  // other names clients may give (model.served_model_name)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // an embedding's length (embed requests' dimensions are checked against it)
  // The checkpoint has no lm_head (a bare Qwen3Model export with untied embeddings, such as
  // Qwen3-Embedding-8B): embed requests only; generation is refused (build_generate).
  bool embedding_only = false;
  // A sequence-classification checkpoint's label names, in id order (model_config::labels; empty
  // for a causal LM): its logits are one per label. It classifies, reranks (one label: the score
  // is its sigmoid) and embeds; generation is refused.
  std::vector<std::string> labels;
  int64_t num_labels() const noexcept { return static_cast<int64_t>(labels.size()); }
  int32_t max_model_len = 0;
  int32_t default_max_tokens = 256;
  generation_defaults generation;
  const tokenizer* tok = nullptr;  // null: only prompt_ids are served
  chat_renderer chat;              // empty: no chat template available
  // enable_thinking when a chat request leaves it out: Qwen3's own default (true), or the server's
  // default_chat_template_kwargs (vLLM's --default-chat-template-kwargs '{"enable_thinking": false}').
  bool default_enable_thinking = true;
  // vLLM's --trust-request-chat-template: a request may bring its own chat_template (else refused,
  // since a template runs on the server).
  bool trust_request_chat_template = false;
  // How the model writes tool calls ([model] tool_call_parser; auto: from the chat template).
  tool_call_format tool_format = tool_call_format::hermes;
  // Structured output's grammars over the vocabulary (token_table::from_tokenizer of tok),
  // shared by requests with the same format; null: structured output is refused.
  std::shared_ptr<grammar::automaton_cache> grammars;
  // LoRA adapters (troupe serve --lora, and those loaded while it runs), by name; a request's
  // `adapter` picks one, its slot the executor's. Null: none.
  std::shared_ptr<adapter_registry> adapters;
};

struct built_request {
  std::vector<int32_t> prompt;
  sampling_params sampling;
  int32_t max_tokens = 0;
  std::vector<int32_t> stop_ids;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;  // a matched stop string ends the text (vLLM's)
  bool skip_special_tokens = true;          // special tokens have no text (vLLM's default)
  int32_t min_tokens = 0;  // stop strings are not looked for before this many tokens
  int32_t logprobs = -1;  // top alternatives to report per token; -1: no logprobs
  int32_t prompt_logprobs = -1;  // the same for every prompt token; -1: none
  // separate_reasoning: whether the prompt already opened a <think> block; nullopt: not asked.
  std::optional<bool> reasoning_opened_in_prompt;
  int32_t adapter = -1;          // the adapter's slot (model_facts::adapters); -1: the base model
  std::string adapter_identity;  // its identity (prefix caching keys its blocks apart)
};

struct build_result {
  std::optional<built_request> req;
  wire::wire_error error;
};

build_result build_generate(const wire::generate_request& r, const model_facts& m);

// A generate's prompts: its one prompt, or each of a batch (wire::generate_request::prompts) built
// as build_generate builds a request's only prompt; a batch's refusal names the prompt
// ("prompts[2]: ...") and refuses the whole request.
struct batch_build_result {
  std::vector<built_request> reqs;  // one per prompt
  std::optional<wire::wire_error> error;
};
batch_build_result build_generates(const wire::generate_request& r, const model_facts& m);

// An embed request (wire::generate_request::embed): one prompt per input, texts encoded with the
// tokenizer's special tokens (its post-processor: Qwen3-Embedding's appended <|endoftext|> is the
// pooled token, as sentence-transformers and vLLM encode) and ids checked against the vocabulary,
// each fitting max_model_len; the options checked against the model's hidden size.
struct built_embed {
  std::vector<std::vector<int32_t>> prompts;
  embedding_options options;
};
struct embed_build_result {
  std::optional<built_embed> req;
  wire::wire_error error;
};
embed_build_result build_embed(const wire::generate_request& r, const model_facts& m);

// A rerank request (wire::generate_request::rerank): one prompt per document (rerank_prompt, the
// request's instruction or the default), each fitting max_model_len, and the ids of "yes" and "no".
// Needs the tokenizer and lm_head (the score is read from logits).
struct built_rerank {
  std::vector<std::vector<int32_t>> prompts;
  rerank_tokens tokens;
};
struct rerank_build_result {
  std::optional<built_rerank> req;
  wire::wire_error error;
};
rerank_build_result build_rerank(const wire::generate_request& r, const model_facts& m);

struct tokenize_result {
  std::vector<int32_t> ids;
  std::optional<wire::wire_error> error;
};

// vLLM's bad_words as token sequences: each word without its leading spaces, and its form after
// a space when that is another first token of the same length.
std::vector<std::vector<int32_t>> bad_words_ids(const tokenizer& tok, const std::vector<std::string>& words);

// The prompt ids of a request's text or chat prompt (generate and tokenize share it).
tokenize_result prompt_ids(const wire::generate_request& r, const model_facts& m);
tokenize_result prompt_ids(const wire::tokenize_request& r, const model_facts& m);

}  // namespace troupe::serve
