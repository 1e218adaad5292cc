// The prefix-cache unit tests (no Redis): one Boost.Test module over tests/runtime/prefix/*_test.cpp.
#define BOOST_TEST_MODULE troupe_prefix
#include <boost/test/unit_test.hpp>
