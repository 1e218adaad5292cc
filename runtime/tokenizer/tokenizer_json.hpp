// Reads a Hugging Face tokenizer.json into Troupe's tables: vocab and merges with a hand-written
// scanner (the load-time budget is 150 ms; nlohmann::json alone takes ~0.4 s on Qwen3's 11 MB),
// the small sections with nlohmann::json. Configurations Troupe does not implement exactly are
// refused with errc::unsupported rather than tokenised differently.
#pragma once

#include <string>
#include <vector>

#include "runtime/tokenizer/added_tokens.hpp"
#include "runtime/tokenizer/bpe.hpp"

namespace troupe::tok {

struct tokenizer_data {
  enum class split_kind { none, qwen, regex };

  bpe_model bpe;
  std::vector<added_token> added;
  bool nfc = false;
  split_kind split = split_kind::none;
  std::string split_pattern;  // for split_kind::regex
  // The post-processor's TemplateProcessing "single" template: ids before and after the text's
  // (add_special_tokens; Qwen3-Embedding appends <|endoftext|>). Empty for Qwen3's tokenizers.
  std::vector<int32_t> special_prefix, special_suffix;
};

// Throws troupe::error: io_error (unreadable), invalid_checkpoint (malformed, naming the byte
// offset or field), unsupported (a feature outside byte-level BPE as Qwen uses it).
tokenizer_data read_tokenizer_json(const std::string& path);

}  // namespace troupe::tok
