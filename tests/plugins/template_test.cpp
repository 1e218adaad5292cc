// The template plugin of examples/plugin_template, built out of tree against the installed SDK
// by the template_builds test (its path comes in TROUPE_TEMPLATE_PLUGIN), loaded and checked.
#define BOOST_TEST_MODULE plugin_template
#include <boost/test/unit_test.hpp>

#include "tests/plugins/policy_driver.hpp"

using namespace policy_test;

BOOST_AUTO_TEST_CASE(deadline_first_orders_by_deadline) {
  driver d(TROUPE_TEMPLATE_PLUGIN);
  BOOST_TEST(std::string(d.api().name) == "deadline-first");
  d.arrive({.id = 1, .deadline_ns = 0});
  d.arrive({.id = 2, .deadline_ns = 900 * ms});
  d.arrive({.id = 3, .deadline_ns = 300 * ms});
  d.arrive({.id = 4, .deadline_ns = 0});
  BOOST_TEST(d.rank(0, 10) == (ids{3, 2, 1, 4}));
  BOOST_TEST(d.rank(0, 2) == (ids{3, 2}));
  d.run(3);
  d.run(1);
  BOOST_TEST(d.victim(0, {3, 1}) == 1);  // no deadline: furthest away
  d.finish(3);
  BOOST_TEST(d.rank(0, 10) == (ids{2, 4}));
}

BOOST_AUTO_TEST_CASE(deadline_first_default_deadline_and_bad_config) {
  driver d(TROUPE_TEMPLATE_PLUGIN, "default_deadline_ms=500");
  d.arrive({.id = 1, .arrival_ns = 0});                              // due 500 ms
  d.arrive({.id = 2, .arrival_ns = 100 * ms, .deadline_ns = 700 * ms});
  d.arrive({.id = 3, .arrival_ns = 100 * ms});                       // due 600 ms
  BOOST_TEST(d.rank(0, 10) == (ids{1, 3, 2}));
  auto e = driver::create_error(TROUPE_TEMPLATE_PLUGIN, "default_deadline_ms=-1");
  BOOST_TEST(e.find("default_deadline_ms is '-1'") != std::string::npos, e);
  e = driver::create_error(TROUPE_TEMPLATE_PLUGIN, "speed=3");
  BOOST_TEST(e.find("unknown or empty config item 'speed'") != std::string::npos, e);
}
