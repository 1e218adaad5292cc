// Streaming detokeniser (see tokenizer.hpp). Lossy UTF-8 decoding decides each character from
// at most four bytes, so emitting everything that is already decided and holding back only an
// unfinished sequence gives exactly the whole-text decoding, split at token boundaries.
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe {

void stream_decoder::drain(std::string& out, bool at_end) {
  const auto* p = reinterpret_cast<const unsigned char*>(pending_.data());
  size_t n = pending_.size();
  size_t i = 0;
  size_t valid_from = 0;  // start of the run of valid characters not yet appended
  while (i < n) {
    tok::lossy_item it = tok::next_lossy_item(p + i, n - i, at_end);
    if (it.length == 0) break;  // unfinished character: wait for the next token
    if (!it.valid) {
      out.append(pending_, valid_from, i - valid_from);
      out.append("\xEF\xBF\xBD");
      valid_from = i + it.length;
    }
    i += it.length;
  }
  out.append(pending_, valid_from, i - valid_from);
  pending_.erase(0, i);
}

void stream_decoder::push(int32_t id, std::string& out) {
  std::string_view bytes = tok_->token_bytes(id);  // throws before any state changes
  if (skip_special_ && tok_->is_special(id)) return;
  pending_.append(bytes);
  drain(out, false);
}

std::string stream_decoder::push(int32_t id) {
  std::string out;
  push(id, out);
  return out;
}

std::string stream_decoder::finish() {
  std::string out;
  drain(out, true);
  pending_.clear();
  return out;
}

}  // namespace troupe
