#include "runtime/serve/output_text.hpp"

#include <algorithm>

namespace troupe::serve {

output_text::output_text(const tokenizer* tok, std::vector<std::string> stop_strings, int32_t min_tokens,
                         bool include_stop, bool skip_special)
    : stop_(std::move(stop_strings)), min_tokens_(min_tokens), include_stop_(include_stop) {
  // vLLM's default: special tokens (<|im_end|>, <|endoftext|>) are not part of the text.
  if (tok) {
    dec_.emplace(*tok, skip_special);
    id_limit_ = tok->id_limit();
  }
}

output_text::delta output_text::push(int32_t id) {
  delta d;
  if (stopped_ || !dec_) return d;
  ++pushed_;
  if (id >= 0 && static_cast<size_t>(id) >= id_limit_) return d;  // a padded row: no text (header)
  dec_->push(id, held_);
  if (stop_.empty() || pushed_ < min_tokens_) {
    d.text.swap(held_);
    return d;
  }
  // The earliest match of any stop string ends the text (with it, the first listed that matches there).
  size_t first = std::string::npos, len = 0;
  for (const auto& s : stop_)
    if (const auto at = held_.find(s); at < first) {
      first = at;
      len = s.size();
    }
  if (first != std::string::npos) {
    d.text = held_.substr(0, first + (include_stop_ ? len : 0));
    d.stopped = stopped_ = true;
    held_.clear();
    return d;
  }
  // Hold back the longest tail that is still the start of some stop string.
  size_t hold = 0;
  for (const auto& s : stop_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > hold; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  d.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return d;
}

std::string output_text::finish() {
  if (stopped_ || !dec_) return {};
  std::string out;
  out.swap(held_);
  out += dec_->finish();
  return out;
}

}  // namespace troupe::serve
