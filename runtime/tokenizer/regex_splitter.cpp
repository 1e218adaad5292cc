// PCRE2-backed Split pre-tokenizer for patterns other than Qwen's (see pretokenizer.hpp).
// Text is validated once by the caller, so matching passes PCRE2_NO_UTF_CHECK: PCRE2 would
// otherwise re-validate the whole subject on each call, which is quadratic (stack.md, §7).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>


#include "runtime/core/error.hpp"
#include "runtime/tokenizer/pretokenizer.hpp"

namespace troupe::tok {

struct regex_splitter::impl {
  pcre2_code* code = nullptr;
};

regex_splitter::regex_splitter(const std::string& pattern) : impl_(std::make_unique<impl>()) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw_error(errc::unsupported, "pre_tokenizer Split pattern does not compile with PCRE2 at offset " +
                                       std::to_string(offset) + ": " + reinterpret_cast<char*>(msg));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
}

regex_splitter::~regex_splitter() { pcre2_code_free(impl_->code); }

void regex_splitter::split(std::string_view text, std::vector<std::pair<size_t, size_t>>& pieces) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  size_t pos = 0;
  size_t gap = 0;  // start of text not yet covered by a piece
  while (pos <= text.size()) {
    int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                         PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // deep backtracking: the interpreter keeps its stack on the heap
      rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw_error(errc::internal, "PCRE2 match failed with code " + std::to_string(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: HF skips it; step one character forward
      if (b >= text.size()) break;
      pos = b + static_cast<size_t>(utf8_length(static_cast<unsigned char>(text[b])));
      continue;
    }
    if (b > gap) pieces.emplace_back(gap, b - gap);
    pieces.emplace_back(b, e - b);
    gap = pos = e;
  }
  if (gap < text.size()) pieces.emplace_back(gap, text.size() - gap);
  pcre2_match_data_free(md);
}

}  // namespace troupe::tok
