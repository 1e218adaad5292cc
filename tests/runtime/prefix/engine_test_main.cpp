// Prefix reuse through the real engine (golden checkpoints): bitwise logits, and serving outputs
// with the cache on equal to the cache off, locally and through a shared store.
#define BOOST_TEST_MODULE troupe_prefix_engine
#include <boost/test/unit_test.hpp>
