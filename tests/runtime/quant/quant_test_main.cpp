#define BOOST_TEST_MODULE troupe_quant
#include <boost/test/unit_test.hpp>
