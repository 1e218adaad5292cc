// token_table::from_tokenizer, apart so that the grammar code builds without the tokenizer
// (tools/fuzz.sh grammar compiles it alone).
#include "runtime/grammar/token_table.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace troupe::grammar {

std::shared_ptr<const token_table> token_table::from_tokenizer(const tokenizer& tok) {
  std::vector<std::string> bytes(tok.id_limit());
  for (size_t id = 0; id < bytes.size(); ++id) {
    const auto i = static_cast<int32_t>(id);
    if (!tok.contains(i) || tok.is_special(i)) continue;
    bytes[id] = std::string(tok.token_bytes(i));
  }
  return std::make_shared<const token_table>(std::move(bytes));
}

}  // namespace troupe::grammar
