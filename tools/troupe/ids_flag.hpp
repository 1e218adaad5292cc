// --ids 1,2,3: a prompt as token ids, for `troupe generate`, `troupe logits` and `troupe client`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::cli {

// The comma-separated ids of `text`; troupe::error(invalid_argument) naming the first item that is
// not a token id (empty, not a whole number, negative, or past INT32_MAX), or when there are none.
std::vector<int32_t> parse_ids(const std::string& text);

// troupe::error(out_of_range) "<what>: token id N is outside the vocabulary [0, vocab_size)" for
// the first id at or past vocab_size.
void check_ids_in_vocab(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& what = "--ids");

}  // namespace troupe::cli
