// redis_kv_store against a real redis-server: pipelined reads and writes, TTLs, NX, binary and
// large values, AUTH (password and ACL user), SELECT; and the faults: down at start, killed
// mid-run, restarted, paused (hung), slowed by DEBUG SLEEP. No call may outlive its deadline.
#include <boost/test/unit_test.hpp>

#include <thread>

#include "runtime/prefix/redis_kv_store.hpp"
#include "tests/runtime/prefix/print.hpp"
#include "tests/runtime/prefix/redis_server.hpp"

using namespace troupe;
using namespace troupe::prefix;
using namespace std::chrono_literals;
using troupe::testing::redis_server;

namespace {

redis_options opts_for(const std::string& url) {
  redis_options o;
  o.url = parse_redis_url(url);
  o.connect_timeout = 200ms;
  o.backoff_initial = 50ms;
  o.backoff_max = 400ms;
  return o;
}

store_clock::time_point in(std::chrono::milliseconds d) { return store_clock::now() + d; }

double ms_since(store_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(store_clock::now() - t0).count();
}

std::string bytes(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// Retries `f` until it returns ok or `limit` passes (reconnection after back-off).
template <class F>
store_status eventually(F f, std::chrono::milliseconds limit = 3000ms) {
  auto until = store_clock::now() + limit;
  store_status st;
  do {
    st = f();
    if (st == store_status::ok) return st;
    std::this_thread::sleep_for(10ms);
  } while (store_clock::now() < until);
  return st;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redis_kv_store_suite)

BOOST_AUTO_TEST_CASE(round_trip_with_ttl_nx_and_binary_values) {
  redis_server srv;
  redis_kv_store store(opts_for(srv.url()));
  BOOST_TEST(!store.connected());  // lazily
  std::vector<std::string> keys = {"t:a", "t:b", "t:c"};
  std::string big = bytes(4 << 20, 1), small("x\0y\r\n$3\r\n", 9);
  std::vector<std::string_view> values = {big, small, ""};
  size_t written = 0;
  BOOST_TEST(store.put(keys, values, 60s, written, in(5000ms)) == store_status::ok);
  BOOST_TEST(written == 3u);
  BOOST_TEST(store.connected());
  // NX: an existing key is left alone.
  std::string other = "other";
  std::vector<std::string_view> again = {other, other, other};
  BOOST_TEST(store.put(keys, again, 60s, written, in(5000ms)) == store_status::ok);
  BOOST_TEST(written == 0u);

  std::vector<std::string> probe = {"t:a", "t:missing", "t:c"};
  std::vector<uint8_t> found;
  BOOST_TEST(store.exists(probe, found, in(1000ms)) == store_status::ok);
  BOOST_TEST(found == (std::vector<uint8_t>{1, 0, 1}), boost::test_tools::per_element());

  auto ttl = srv.command({"TTL", "t:b"});
  BOOST_TEST(ttl->integer > 55);
  BOOST_TEST(ttl->integer <= 60);
  std::vector<std::optional<stored_value>> got;
  BOOST_TEST(store.get(probe, got, 3600s, in(5000ms)) == store_status::ok);
  BOOST_REQUIRE(got.size() == 3u);
  BOOST_REQUIRE(got[0].has_value());
  BOOST_TEST((got[0]->bytes == big));
  BOOST_TEST(!got[1].has_value());
  BOOST_REQUIRE(got[2].has_value());
  BOOST_TEST(got[2]->bytes.empty());
  BOOST_TEST(srv.command({"TTL", "t:a"})->integer > 3500);  // refreshed by the read
  BOOST_TEST(srv.command({"TTL", "t:b"})->integer <= 60);   // not read: not refreshed
  auto raw = srv.command({"GET", "t:b"});
  BOOST_TEST(std::string(raw->str, raw->len) == small);
  BOOST_TEST(store.counters().connects == 1);
}

BOOST_AUTO_TEST_CASE(a_pipeline_of_many_large_values) {
  redis_server srv;
  redis_kv_store store(opts_for(srv.url()));
  std::vector<std::string> keys, data;
  for (int i = 0; i < 64; ++i) {
    keys.push_back("blk:" + std::to_string(i));
    data.push_back(bytes(1 << 20, static_cast<unsigned>(i)));
  }
  std::vector<std::string_view> values(data.begin(), data.end());
  size_t written = 0;
  auto t0 = store_clock::now();
  BOOST_TEST(store.put(keys, values, 60s, written, in(20000ms)) == store_status::ok);
  const double put_ms = ms_since(t0);
  BOOST_TEST(written == 64u);
  std::vector<std::optional<stored_value>> got;
  t0 = store_clock::now();
  BOOST_TEST(store.get(keys, got, 0s, in(20000ms)) == store_status::ok);
  const double get_ms = ms_since(t0);
  for (int i = 0; i < 64; ++i) BOOST_TEST((got[static_cast<size_t>(i)] && got[static_cast<size_t>(i)]->bytes == data[static_cast<size_t>(i)]));
  BOOST_TEST_MESSAGE("64 MiB: put " << put_ms << " ms, get " << get_ms << " ms");
}

BOOST_AUTO_TEST_CASE(auth_with_a_password_and_with_an_acl_user) {
  redis_server srv({"--requirepass", "s3cret"});
  {
    redis_kv_store store(opts_for(srv.url(":s3cret@")));
    BOOST_TEST(store.ping(in(1000ms)) == store_status::ok);
  }
  {
    redis_kv_store store(opts_for(srv.url(":wrong@")));
    BOOST_TEST(store.ping(in(1000ms)) == store_status::error);
    BOOST_TEST(!store.connected());
    BOOST_TEST(store.counters().connect_failures == 1);
    BOOST_TEST(store.ping(in(1000ms)) == store_status::unavailable);  // backing off
  }
  {
    redis_kv_store store(opts_for(srv.url()));  // no password: every command is refused
    std::vector<std::string> keys = {"k"};
    std::vector<uint8_t> found;
    BOOST_TEST(store.exists(keys, found, in(1000ms)) == store_status::error);
    BOOST_TEST(store.counters().error_replies == 1);
  }
  auto acl = srv.command({"ACL", "SETUSER", "alice", "on", ">pa:ss@1", "~troupe:*", "+@all"}, "s3cret");
  BOOST_REQUIRE(acl->type == REDIS_REPLY_STATUS);
  redis_kv_store store(opts_for(srv.url("alice:pa%3Ass%401@")));
  std::vector<std::string> keys = {"troupe:x"};
  std::string v = "v";
  std::vector<std::string_view> values = {v};
  size_t written = 0;
  BOOST_TEST(store.put(keys, values, 10s, written, in(1000ms)) == store_status::ok);
  BOOST_TEST(written == 1u);
  std::vector<std::string> outside = {"other:x"};  // the ACL allows troupe:* only
  BOOST_TEST(store.put(outside, values, 10s, written, in(1000ms)) == store_status::error);
}

BOOST_AUTO_TEST_CASE(select_a_database_over_tcp) {
  redis_server srv({}, true);
  redis_kv_store store(opts_for(srv.url("", 3)));
  std::vector<std::string> keys = {"in3"};
  std::string v = "three";
  std::vector<std::string_view> values = {v};
  size_t written = 0;
  BOOST_TEST(store.put(keys, values, 10s, written, in(1000ms)) == store_status::ok);
  BOOST_TEST(srv.command({"EXISTS", "in3"})->integer == 0);  // not in db 0
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(srv.connect(), redisFree);
  troupe::testing::redis_reply(static_cast<redisReply*>(redisCommand(c.get(), "SELECT 3")));
  troupe::testing::redis_reply r(static_cast<redisReply*>(redisCommand(c.get(), "GET in3")));
  BOOST_TEST(std::string(r->str, r->len) == "three");
}

BOOST_AUTO_TEST_CASE(down_at_start_then_up) {
  char tmpl[] = "/tmp/troupe-nored-XXXXXX";
  BOOST_REQUIRE(mkdtemp(tmpl));
  redis_kv_store store(opts_for(std::string("unix://") + tmpl + "/none.sock"));
  auto t0 = store_clock::now();
  BOOST_TEST(store.ping(in(1000ms)) == store_status::unavailable);
  BOOST_TEST(ms_since(t0) < 100.0);  // refused at once, not after the deadline
  BOOST_TEST(store.ping(in(1000ms)) == store_status::unavailable);
  BOOST_TEST(store.counters().connect_failures == 1);  // the second call did not even try
  BOOST_TEST(store.counters().skipped_backoff == 1);
  std::filesystem::remove(tmpl);

  redis_server srv;  // "comes up later": another socket, so point a store at it
  redis_kv_store late(opts_for(srv.url()));
  srv.stop();
  BOOST_TEST(late.ping(in(1000ms)) == store_status::unavailable);
  srv.start();
  BOOST_TEST(eventually([&] { return late.ping(in(1000ms)); }) == store_status::ok);
  BOOST_TEST(late.counters().connects == 1);
  BOOST_TEST(late.counters().connect_failures >= 1);
}

BOOST_AUTO_TEST_CASE(killed_mid_run_then_restarted) {
  redis_server srv;
  redis_kv_store store(opts_for(srv.url()));
  BOOST_TEST(store.ping(in(1000ms)) == store_status::ok);
  srv.stop(SIGKILL);
  auto t0 = store_clock::now();
  std::vector<std::string> keys = {"k"};
  std::vector<std::optional<stored_value>> got;
  BOOST_TEST(store.get(keys, got, 0s, in(1000ms)) == store_status::unavailable);
  BOOST_TEST(ms_since(t0) < 100.0);
  BOOST_TEST(store.counters().disconnects == 1);
  BOOST_TEST(!store.connected());
  // Reconnect attempts back off (50, 100, 200, 400, 400 ms ...) until it is back.
  for (int i = 0; i < 5; ++i) {
    (void)store.ping(in(1000ms));
    std::this_thread::sleep_for(30ms);
  }
  const auto failures = store.counters().connect_failures;
  BOOST_TEST(failures >= 1);
  BOOST_TEST(failures < 5);  // not one attempt per call
  srv.start();
  BOOST_TEST(eventually([&] { return store.ping(in(1000ms)); }) == store_status::ok);
  BOOST_TEST(store.counters().connects == 2);
}

BOOST_AUTO_TEST_CASE(a_hung_server_costs_at_most_the_deadline) {
  redis_server srv;
  redis_kv_store store(opts_for(srv.url()));
  BOOST_TEST(store.ping(in(1000ms)) == store_status::ok);
  srv.pause();
  std::vector<std::string> keys = {"k"};
  std::vector<uint8_t> found;
  auto t0 = store_clock::now();
  BOOST_TEST(store.exists(keys, found, in(100ms)) == store_status::timeout);
  const double took = ms_since(t0);
  BOOST_TEST(took >= 95.0);
  BOOST_TEST(took < 160.0);
  BOOST_TEST(store.counters().timeouts == 1);
  t0 = store_clock::now();
  BOOST_TEST(store.exists(keys, found, in(100ms)) == store_status::unavailable);  // backing off
  BOOST_TEST(ms_since(t0) < 20.0);
  srv.resume();
  BOOST_TEST(eventually([&] { return store.exists(keys, found, in(500ms)); }) == store_status::ok);
}

BOOST_AUTO_TEST_CASE(injected_latency_within_and_beyond_the_deadline) {
  redis_server srv({"--enable-debug-command", "yes"});
  redis_kv_store store(opts_for(srv.url()));
  BOOST_TEST(store.ping(in(1000ms)) == store_status::ok);
  // DEBUG SLEEP blocks the whole server: every client waits that long.
  // The server sleeps 600 ms; a 100 ms deadline must end the call long before that (300 ms leaves
  // room for a loaded CI machine; a call that ignored the deadline would take ~550 ms).
  std::thread slow([&] { srv.command({"DEBUG", "SLEEP", "0.6"}); });
  std::this_thread::sleep_for(50ms);
  auto t0 = store_clock::now();
  BOOST_TEST(store.ping(in(100ms)) == store_status::timeout);
  BOOST_TEST(ms_since(t0) < 300.0);
  slow.join();
  std::thread slower([&] { srv.command({"DEBUG", "SLEEP", "0.2"}); });
  std::this_thread::sleep_for(50ms);
  t0 = store_clock::now();
  BOOST_TEST(eventually([&] { return store.ping(in(1000ms)); }) == store_status::ok);  // waits it out
  slower.join();
}

BOOST_AUTO_TEST_SUITE_END()
