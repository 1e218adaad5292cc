// --redis URLs: every accepted form, and each malformed one refused with its reason.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/prefix/redis_url.hpp"

using namespace troupe;
using namespace troupe::prefix;

namespace {
bool refused(const std::string& url, const std::string& needle) {
  try {
    parse_redis_url(url);
  } catch (const troupe::error& e) {
    std::string m = e.what();
    BOOST_TEST_MESSAGE(m);
    return e.code() == errc::invalid_argument && m.find(needle) != std::string::npos &&
           m.find("s3cret") == std::string::npos;  // never echo a password
  }
  return false;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(redis_url_suite)

BOOST_AUTO_TEST_CASE(tcp_forms) {
  auto u = parse_redis_url("redis://cache.local");
  BOOST_TEST(!u.unix_socket);
  BOOST_TEST(u.host == "cache.local");
  BOOST_TEST(u.port == 6379);
  BOOST_TEST(u.db == 0);
  BOOST_TEST(u.password.empty());
  u = parse_redis_url("redis://alice:p%40ss%3Aw@10.0.0.5:6380/3");
  BOOST_TEST(u.user == "alice");
  BOOST_TEST(u.password == "p@ss:w");
  BOOST_TEST(u.host == "10.0.0.5");
  BOOST_TEST(u.port == 6380);
  BOOST_TEST(u.db == 3);
  BOOST_TEST(u.redacted() == "redis://alice:***@10.0.0.5:6380/3");
  u = parse_redis_url("redis://:s3cret@[::1]:7000");
  BOOST_TEST(u.user.empty());
  BOOST_TEST(u.password == "s3cret");
  BOOST_TEST(u.host == "::1");
  BOOST_TEST(u.port == 7000);
  BOOST_TEST(u.redacted() == "redis://:***@[::1]:7000/0");
  u = parse_redis_url("redis://s3cret@h:1/");
  BOOST_TEST(u.password == "s3cret");
  BOOST_TEST(u.db == 0);
}

BOOST_AUTO_TEST_CASE(unix_forms) {
  auto u = parse_redis_url("unix:///tmp/r/redis.sock");
  BOOST_TEST(u.unix_socket);
  BOOST_TEST(u.path == "/tmp/r/redis.sock");
  u = parse_redis_url("unix://bob:s3cret@/run/redis.sock?db=2");
  BOOST_TEST(u.user == "bob");
  BOOST_TEST(u.password == "s3cret");
  BOOST_TEST(u.path == "/run/redis.sock");
  BOOST_TEST(u.db == 2);
  BOOST_TEST(u.redacted() == "unix://bob:***@/run/redis.sock?db=2");
}

BOOST_AUTO_TEST_CASE(malformed_urls) {
  BOOST_TEST(refused("http://host", "unknown scheme"));
  BOOST_TEST(refused("redis://", "no host"));
  BOOST_TEST(refused("redis://host:", "empty port"));
  BOOST_TEST(refused("redis://host:99999", "port \"99999\" is not a number in 1..65535"));
  BOOST_TEST(refused("redis://host:6379/x", "db \"x\" is not a number"));
  BOOST_TEST(refused("redis://u:s3cret@host:abc", "port \"abc\""));
  BOOST_TEST(refused("redis://[::1:6379", "unclosed '['"));
  BOOST_TEST(refused("redis://u:s3cret%zz@host", "bad percent escape"));
  BOOST_TEST(refused("redis://alice:@host", "a user needs a password"));
  BOOST_TEST(refused("unix://relative.sock", "must be absolute"));
  BOOST_TEST(refused("unix:///a.sock?database=1", "the only query parameter is db=N"));
}

BOOST_AUTO_TEST_SUITE_END()
