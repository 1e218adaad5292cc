// token_table: every token of the Qwen3 vocabulary is found by walking its bytes from the root,
// special tokens are absent, and children are in byte order.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "runtime/grammar/token_table.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

using troupe::grammar::token_table;

namespace {

int32_t find(const token_table& t, std::string_view bytes) {
  const auto& nodes = t.nodes();
  uint32_t n = 0;
  for (char c : bytes) {
    const auto& nd = nodes[n];
    uint32_t next = 0;
    for (uint32_t k = 0; k < nd.num_children; ++k)
      if (nodes[nd.first_child + k].byte == static_cast<uint8_t>(c)) next = nd.first_child + k;
    if (next == 0) return -1;
    n = next;
  }
  return nodes[n].token;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_token_is_found_by_its_bytes) {
  const troupe::tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  auto t = token_table::from_tokenizer(tok);
  BOOST_TEST(t->id_limit() == tok.id_limit());
  size_t found = 0;
  for (size_t id = 0; id < t->id_limit(); ++id) {
    const auto i = static_cast<int32_t>(id);
    if (!tok.contains(i)) continue;
    if (tok.is_special(i)) {
      BOOST_TEST(t->bytes(i).empty(), id);
      continue;
    }
    BOOST_TEST(t->bytes(i) == tok.token_bytes(i));
    if (find(*t, tok.token_bytes(i)) == i) ++found;
  }
  BOOST_TEST(found > 151000u);
  for (const auto& nd : t->nodes())
    for (uint32_t k = 1; k < nd.num_children; ++k)
      BOOST_TEST(t->nodes()[nd.first_child + k - 1].byte < t->nodes()[nd.first_child + k].byte);
}

BOOST_AUTO_TEST_CASE(duplicate_and_empty_bytes) {
  token_table t({"ab", "", "a", "ab", "b"});
  BOOST_TEST(find(t, "a") == 2);
  BOOST_TEST(find(t, "ab") == 0);  // the first id of equal bytes
  BOOST_TEST(find(t, "b") == 4);
  BOOST_TEST(find(t, "") == -1);   // the root holds no token
  BOOST_TEST(t.nodes().size() == 4u);
}
