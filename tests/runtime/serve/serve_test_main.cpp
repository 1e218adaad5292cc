#define BOOST_TEST_MODULE serve
#include <boost/test/unit_test.hpp>
