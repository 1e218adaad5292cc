// Tests against real redis-servers that each test starts on loopback (label `redis`).
#define BOOST_TEST_MODULE troupe_prefix_redis
#include <boost/test/unit_test.hpp>
