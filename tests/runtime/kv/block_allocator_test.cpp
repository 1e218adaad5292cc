// Block allocator: exact block ids and free-list order after each operation, reference counts
// under sharing, and the pool-accounting invariants.
#define BOOST_TEST_MODULE block_allocator
#include <boost/test/unit_test.hpp>

#include <random>

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

BOOST_AUTO_TEST_CASE(fresh_pool_is_all_free_in_order) {
  block_allocator a(4, 16);
  BOOST_TEST(a.free_list() == (ids{0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(a.num_free_blocks() == 4);
  BOOST_TEST(a.usage() == 0.0);
  a.check_invariants();
}

BOOST_AUTO_TEST_CASE(allocation_takes_from_the_front_free_returns_reversed_to_the_back) {
  block_allocator a(6, 4);
  BOOST_TEST(a.allocate(1, 9));   // 3 blocks
  BOOST_TEST(table(a, 1) == (ids{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(a.allocate(2, 4));   // 1 block
  BOOST_TEST(table(a, 2) == (ids{3}), boost::test_tools::per_element());
  BOOST_TEST(a.free_list() == (ids{4, 5}), boost::test_tools::per_element());
  a.free(1);
  BOOST_TEST(a.free_list() == (ids{4, 5, 2, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(a.allocate(3, 8));
  BOOST_TEST(table(a, 3) == (ids{4, 5}), boost::test_tools::per_element());
  BOOST_TEST(a.allocate(3, 9));   // grows by one block, the next on the list
  BOOST_TEST(table(a, 3) == (ids{4, 5, 2}), boost::test_tools::per_element());
  BOOST_TEST(a.num_used_blocks() == 4);
  a.check_invariants();
  a.free(2);
  a.free(3);
  BOOST_TEST(a.free_list() == (ids{1, 0, 3, 2, 5, 4}), boost::test_tools::per_element());
  BOOST_TEST(a.num_free_blocks() == 6);
  a.check_invariants();
}

BOOST_AUTO_TEST_CASE(shrink_returns_the_tail_to_the_front_of_the_free_list) {
  block_allocator a(6, 4);
  BOOST_TEST(a.allocate(1, 17));  // 5 blocks
  a.shrink(1, 9);                 // 9 tokens need 3
  BOOST_TEST(table(a, 1) == (ids{0, 1, 2}), boost::test_tools::per_element());
  BOOST_TEST(a.free_list() == (ids{3, 4, 5}), boost::test_tools::per_element());
  a.shrink(1, 12);  // already within: nothing changes
  a.shrink(7, 0);   // an unknown sequence: a no-op
  BOOST_TEST(table(a, 1).size() == 3u);
  a.check_invariants();
  BOOST_TEST(a.allocate(2, 4));
  BOOST_TEST(table(a, 2) == (ids{3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(append_slot_allocates_only_at_block_boundaries) {
  block_allocator a(3, 4);
  BOOST_TEST(a.allocate(7, 3));
  BOOST_TEST(a.blocks_needed(7, 4) == 0);
  BOOST_TEST(a.append_slot(7, 3));  // 4 tokens fit in block 0
  BOOST_TEST(table(a, 7).size() == 1u);
  BOOST_TEST(a.blocks_needed(7, 5) == 1);
  BOOST_TEST(a.append_slot(7, 4));  // the 5th token opens block 1
  BOOST_TEST(table(a, 7) == (ids{0, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(allocation_that_does_not_fit_changes_nothing) {
  block_allocator a(4, 16);
  BOOST_TEST(a.allocate(1, 40));  // 3 blocks
  BOOST_TEST(!a.can_allocate(2, 17));
  BOOST_TEST(!a.allocate(2, 17));
  BOOST_TEST(!a.has(2));
  BOOST_TEST(!a.allocate(1, 65));  // would need 2 more
  BOOST_TEST(table(a, 1).size() == 3u);
  BOOST_TEST(a.free_list() == (ids{3}), boost::test_tools::per_element());
  BOOST_TEST(a.can_allocate(1, 64));
  a.check_invariants();
}

BOOST_AUTO_TEST_CASE(shared_blocks_are_freed_by_their_last_user) {
  block_allocator a(5, 4);
  BOOST_TEST(a.allocate(1, 10));  // blocks 0, 1, 2 (the last partly filled)
  a.fork(1, 2, 10);               // shares only the two full blocks
  BOOST_TEST(table(a, 2) == (ids{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(a.ref_count(0) == 2);
  BOOST_TEST(a.ref_count(2) == 1);
  BOOST_TEST(a.allocate(2, 12));  // the child continues in its own block
  BOOST_TEST(table(a, 2) == (ids{0, 1, 3}), boost::test_tools::per_element());
  a.check_invariants();
  a.free(1);
  BOOST_TEST(a.ref_count(0) == 1);
  BOOST_TEST(a.free_list() == (ids{4, 2}), boost::test_tools::per_element());
  a.free(2);
  BOOST_TEST(a.free_list() == (ids{4, 2, 3, 1, 0}), boost::test_tools::per_element());
  a.check_invariants();
}

BOOST_AUTO_TEST_CASE(freeing_an_unknown_sequence_is_a_no_op) {
  block_allocator a(2, 16);
  a.free(42);
  BOOST_TEST(a.num_free_blocks() == 2);
}

BOOST_AUTO_TEST_CASE(bad_construction_and_fork_are_errors) {
  BOOST_CHECK_THROW(block_allocator(0, 16), troupe::error);
  BOOST_CHECK_THROW(block_allocator(4, 0), troupe::error);
  block_allocator a(2, 16);
  BOOST_CHECK_THROW(a.fork(1, 2, 16), troupe::error);
}

BOOST_AUTO_TEST_CASE(random_workload_keeps_the_invariants_and_returns_to_full) {
  block_allocator a(64, 16);
  std::mt19937 rng(7);
  std::unordered_map<int64_t, int64_t> len;
  int64_t next = 0;
  for (int step = 0; step < 5000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 3 || len.empty()) {
      int64_t n = 1 + rng() % 100;
      if (a.allocate(next, n)) len[next] = n;
      ++next;
    } else if (op < 8) {
      auto it = std::next(len.begin(), static_cast<long>(rng() % len.size()));
      if (a.append_slot(it->first, it->second)) ++it->second;
    } else {
      auto it = std::next(len.begin(), static_cast<long>(rng() % len.size()));
      a.free(it->first);
      len.erase(it);
    }
    a.check_invariants();
    for (const auto& [s, n] : len) BOOST_REQUIRE(a.block_table(s).size() == size_t(a.blocks_for_tokens(n)));
  }
  for (const auto& [s, n] : len) a.free(s);
  BOOST_TEST(a.num_free_blocks() == 64);
  a.check_invariants();
}
