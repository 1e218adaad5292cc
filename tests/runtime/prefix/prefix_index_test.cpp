// The local prefix index: longest-prefix matches, one hash per block and one block per hash,
// eviction, and the refusal of duplicates.
#include <boost/test/unit_test.hpp>

#include "tests/runtime/prefix/print.hpp"

#include "runtime/prefix/prefix_index.hpp"

using namespace troupe;
using namespace troupe::prefix;
using ids = std::vector<block_id>;

namespace {
block_hash h(uint8_t v) {
  block_hash x;
  x.bytes[0] = v;
  x.bytes[15] = static_cast<uint8_t>(255 - v);
  return x;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(prefix_index_suite)

BOOST_AUTO_TEST_CASE(match_stops_at_the_first_miss_and_at_the_cap) {
  prefix_index idx(8);
  BOOST_TEST(idx.insert(h(1), 5));
  BOOST_TEST(idx.insert(h(2), 3));
  BOOST_TEST(idx.insert(h(4), 7));  // not reachable: h(3) is missing
  std::vector<block_hash> chain = {h(1), h(2), h(3), h(4)};
  BOOST_TEST(idx.match(chain, 10) == (ids{5, 3}), boost::test_tools::per_element());
  BOOST_TEST(idx.match(chain, 1) == (ids{5}), boost::test_tools::per_element());
  BOOST_TEST(idx.match(chain, 0).empty());
  std::vector<block_hash> other = {h(9), h(1)};
  BOOST_TEST(idx.match(other, 10).empty());
  BOOST_TEST(idx.num_cached_blocks() == 3);
  idx.check_invariants();
}

BOOST_AUTO_TEST_CASE(duplicates_are_refused_and_eviction_forgets) {
  prefix_index idx(4);
  BOOST_TEST(idx.insert(h(1), 0));
  BOOST_TEST(!idx.insert(h(1), 2));  // same content computed twice: the second copy stays uncached
  BOOST_TEST(!idx.insert(h(1), 0));  // re-registering the same pair is a no-op
  BOOST_TEST(!idx.hash_of(2).has_value());
  BOOST_TEST(*idx.block_of(h(1)) == 0);
  BOOST_TEST(idx.evict(0));
  BOOST_TEST(!idx.evict(0));
  BOOST_TEST(!idx.block_of(h(1)).has_value());
  BOOST_TEST(idx.insert(h(1), 2));  // now the other copy may hold it
  BOOST_TEST(*idx.hash_of(2) == h(1));
  idx.check_invariants();
  idx.clear();
  BOOST_TEST(idx.num_cached_blocks() == 0);
  BOOST_TEST(!idx.hash_of(2).has_value());
  idx.check_invariants();
}

BOOST_AUTO_TEST_SUITE_END()
