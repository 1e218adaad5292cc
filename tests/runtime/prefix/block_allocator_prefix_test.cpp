// block_allocator::allocate_with_prefix (added for prefix caching): cached blocks are shared or
// taken off the free list, the rest comes from its front, and a refusal changes nothing.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/kv/block_allocator.hpp"

using troupe::block_allocator;
using ids = std::vector<troupe::block_id>;

namespace {
ids table(const block_allocator& a, int64_t seq) {
  auto t = a.block_table(seq);
  return {t.begin(), t.end()};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(block_allocator_prefix)

BOOST_AUTO_TEST_CASE(free_cached_blocks_leave_the_list_used_ones_are_shared) {
  block_allocator a(6, 4);
  BOOST_TEST(a.allocate(1, 12));  // 0 1 2
  BOOST_TEST(a.allocate(2, 4));   // 3
  a.free(1);                      // free: 4 5 2 1 0
  const ids cached = {0, 1, 3};   // 0 and 1 are free, 3 is in use by sequence 2
  BOOST_TEST(a.allocate_with_prefix(7, cached, 17));  // 5 blocks: three cached, two fresh
  BOOST_TEST(table(a, 7) == (ids{0, 1, 3, 4, 5}), boost::test_tools::per_element());
  BOOST_TEST(a.free_list() == (ids{2}), boost::test_tools::per_element());
  BOOST_TEST(a.ref_count(3) == 2);
  BOOST_TEST(a.ref_count(0) == 1);
  a.check_invariants();
  a.free(7);
  BOOST_TEST(a.free_list() == (ids{2, 5, 4, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(a.ref_count(3) == 1);
  a.check_invariants();
}

BOOST_AUTO_TEST_CASE(too_few_free_blocks_changes_nothing) {
  block_allocator a(4, 4);
  BOOST_TEST(a.allocate(1, 8));  // 0 1
  a.free(1);                     // free: 2 3 1 0
  // Taking 0 and 1 off the list leaves 2 and 3: three more are needed.
  BOOST_TEST(!a.allocate_with_prefix(2, ids{0, 1}, 20));
  BOOST_TEST(!a.has(2));
  BOOST_TEST(a.free_list() == (ids{2, 3, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(a.allocate_with_prefix(2, ids{0, 1}, 16));
  BOOST_TEST(table(a, 2) == (ids{0, 1, 2, 3}), boost::test_tools::per_element());
  a.check_invariants();
}

BOOST_AUTO_TEST_CASE(a_sequence_with_blocks_is_refused) {
  block_allocator a(4, 4);
  BOOST_TEST(a.allocate(1, 4));
  BOOST_CHECK_EXCEPTION(a.allocate_with_prefix(1, ids{}, 4), troupe::error, [](const troupe::error& e) {
    return std::string(e.what()) == "block_allocator::allocate_with_prefix: sequence 1 already has blocks";
  });
}

BOOST_AUTO_TEST_SUITE_END()
