// troupe::tokenizer: the Qwen3 (byte-level BPE) tokenizer loaded from a model directory's
// tokenizer.json and tokenizer_config.json. encode() gives exactly Hugging Face's ids (no BOS or
// EOS added); decode() its text. Immutable after loading: safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class stream_decoder;

class tokenizer {
 public:
  // Reads <model_dir>/tokenizer.json and, when present, <model_dir>/tokenizer_config.json.
  // Throws troupe::error (io_error, invalid_checkpoint, unsupported) naming the file and field.
  explicit tokenizer(const std::string& model_dir);
  ~tokenizer();
  tokenizer(tokenizer&&) noexcept;
  tokenizer& operator=(tokenizer&&) noexcept;

  // Added tokens written in the text (<|im_start|>, <think>, ...) become their single ids.
  // Throws troupe::error(invalid_input) naming the byte offset when text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;
  void encode(std::string_view text, std::vector<int32_t>& out) const;  // appends
  // encode() inside the post-processor's template: Hugging Face's add_special_tokens=True, how
  // sentence-transformers and vLLM encode an embedding model's input (Qwen3-Embedding's
  // tokenizer.json appends <|endoftext|>; Qwen3's own tokenizers add nothing).
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const;

  // Bad UTF-8 across the ids' bytes becomes U+FFFD, as in Hugging Face. Throws
  // troupe::error(out_of_range) for an id that is neither in the vocabulary nor an added token.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The raw bytes an id decodes to (not necessarily whole UTF-8 characters); throws like decode.
  std::string_view token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;  // an added token flagged special (skipped when asked)
  bool contains(int32_t id) const;

  // Ids of the tokens named in tokenizer_config.json; nullopt when not set.
  std::optional<int32_t> eos_token_id() const;  // Qwen3: <|im_end|>
  std::optional<int32_t> pad_token_id() const;  // Qwen3: <|endoftext|>
  std::optional<int32_t> bos_token_id() const;  // Qwen3: none
  // <|endoftext|>, the end of a document; nullopt for a vocabulary without it.
  std::optional<int32_t> endoftext_token_id() const;
  // An added token by its text, or a vocabulary token by its raw bytes.
  std::optional<int32_t> token_to_id(std::string_view text) const;

  size_t id_limit() const;    // one past the largest id (Qwen3: 151,669)
  size_t num_merges() const;
  const std::string& model_dir() const;

 private:
  friend class stream_decoder;
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Streaming detokeniser: ids arrive one at a time; each push returns the text that is now
// complete (whole UTF-8 characters only). The deltas concatenated, plus finish(), equal
// decode() of all the ids. Holds a reference to its tokenizer, which must outlive it.
class stream_decoder {
 public:
  explicit stream_decoder(const tokenizer& tok, bool skip_special_tokens = false)
      : tok_(&tok), skip_special_(skip_special_tokens) {}

  // Throws troupe::error(out_of_range) for an unknown id; the decoder is then unchanged.
  std::string push(int32_t id);
  void push(int32_t id, std::string& out);  // appends the delta
  // Ends the stream: bytes of an incomplete character become U+FFFD. The decoder is then empty
  // and can start a new stream.
  std::string finish();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  void drain(std::string& out, bool at_end);
  const tokenizer* tok_;
  bool skip_special_;
  std::string pending_;  // at most 3 bytes of an unfinished character
};

}  // namespace troupe
