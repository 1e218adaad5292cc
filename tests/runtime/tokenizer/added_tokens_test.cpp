// Added-token matching: leftmost, then longest; exact bytes (no case folding); nothing inside
// near-misses.
#include <boost/test/unit_test.hpp>

#include "runtime/tokenizer/added_tokens.hpp"

using namespace troupe::tok;

BOOST_AUTO_TEST_SUITE(added_tokens)

BOOST_AUTO_TEST_CASE(leftmost_then_longest) {
  added_token_matcher m({{1, "<a>", true}, {2, "<a><b>", false}, {3, "<b>", true}, {4, "x", false}});
  auto r = m.find("zz<a><b>q", 0);
  BOOST_TEST(r.offset == 2u);
  BOOST_TEST(r.length == 6u);
  BOOST_TEST(r.id == 2);
  r = m.find("zz<a><c>", 0);
  BOOST_TEST(r.id == 1);
  r = m.find("<b>x", 1);  // search from an offset
  BOOST_TEST(r.offset == 3u);
  BOOST_TEST(r.id == 4);
  BOOST_TEST(m.find("none here", 0).offset == npos);
}

BOOST_AUTO_TEST_CASE(near_misses_do_not_match) {
  added_token_matcher m({{151644, "<|im_start|>", true}, {151645, "<|im_end|>", true}});
  BOOST_TEST(m.find("<|im_start|", 0).offset == npos);
  BOOST_TEST(m.find("<|IM_START|>", 0).offset == npos);
  BOOST_TEST(m.find("< |im_end|>", 0).offset == npos);
  auto r = m.find("<<|im_end|>>", 0);
  BOOST_TEST(r.offset == 1u);
  BOOST_TEST(r.id == 151645);
}

BOOST_AUTO_TEST_SUITE_END()
