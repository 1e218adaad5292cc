#define BOOST_TEST_MODULE actors_e2e
#include <boost/test/unit_test.hpp>
