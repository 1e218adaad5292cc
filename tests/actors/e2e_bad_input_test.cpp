// End to end: every kind of bad input over a real socket gets its error event, never crashes or
// hangs the server, and never disturbs another client's stream.
#include "tests/actors/e2e_fixture.hpp"
#include "tests/runtime/wire/msgpack_builder.hpp"

#include <atomic>
#include <thread>

#include "runtime/wire/frame.hpp"
#include "runtime/wire/request_codec.hpp"

using namespace troupe;
using namespace troupe::e2e;
namespace mb = troupe::wire::test;

namespace {

std::string framed(const std::string& payload) {
  std::string out;
  wire::append_frame(out, payload);
  return out;
}

mb::map generate_with(mb::map extra) {
  mb::map m{{"v", 1}, {"type", "generate"}, {"id", "b"}, {"prompt_ids", mb::array{1, 2, 3}}};
  for (auto& e : extra) m.push_back(std::move(e));
  return m;
}

wire::wire_error expect_error(client::connection& c, const std::string& bytes, const std::string& code,
                              const std::string& needle) {
  c.send_raw(bytes);
  auto ev = c.next_event(std::chrono::seconds(10));
  BOOST_REQUIRE_MESSAGE(ev.has_value(), "no answer to bad input (expected " << code << ")");
  auto* e = std::get_if<wire::wire_error>(&*ev);
  BOOST_REQUIRE_MESSAGE(e, "expected an error event " << code);
  BOOST_TEST(to_string(e->code) == code);
  BOOST_TEST(e->message.find(needle) != std::string::npos, "'" << e->message << "' should contain '" << needle << "'");
  return *e;
}

void still_usable(client::connection& c) {
  c.send(wire::health_request{"h"});
  auto ev = c.next_event(std::chrono::seconds(10));
  BOOST_REQUIRE(ev.has_value());
  BOOST_TEST(std::holds_alternative<wire::health_event>(*ev));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(e2e_bad_input)

BOOST_AUTO_TEST_CASE(each_bad_input_gets_its_error_and_the_connection_stays_usable) {
  auto c = test_config();
  c.max_model_len = 64;
  c.num_kv_blocks = 64;
  auto srv = start(c);
  // Another client streams the whole time: its output must be exactly right.
  client::client good("127.0.0.1", srv->port());
  auto keep = ids_request("keep", {4, 5, 6}, 50, 9);
  auto keep_stream = good.generate(keep);

  client::connection bad("127.0.0.1", srv->port());
  struct kase {
    std::string name, bytes, code, needle;
  };
  std::vector<kase> cases = {
      {"malformed msgpack", framed("\xc1"), "malformed", "not valid msgpack"},
      {"empty frame", framed(""), "malformed", "empty frame"},
      {"not a map", framed(mb::pack(mb::array{1})), "malformed", "must be a msgpack map"},
      {"missing version", framed(mb::pack(mb::map{{"type", "health"}})), "missing_field", "'v'"},
      {"old client", framed(mb::pack(mb::map{{"v", 0}, {"type", "health"}})), "unsupported_version",
       "protocol version 0 is not supported; this server speaks version 1"},
      {"unknown kind", framed(mb::pack(mb::map{{"v", 1}, {"type", "complete"}, {"id", "b"}})), "unknown_type",
       "unknown request type 'complete'"},
      {"unknown field", framed(mb::pack(generate_with({{"temprature", 0.5}}))), "unknown_field",
       "unknown field 'temprature'"},
      {"wrong type", framed(mb::pack(generate_with({{"max_tokens", "9"}}))), "wrong_type",
       "field 'max_tokens' must be an integer; got string"},
      {"missing field", framed(mb::pack(mb::map{{"v", 1}, {"type", "generate"}, {"id", "b"}})), "missing_field",
       "needs one of 'prompt', 'prompt_ids' or 'messages'"},
      {"invalid utf-8", framed(mb::pack(mb::map{{"v", 1}, {"type", "generate"}, {"id", "b"}, {"prompt", "a\xff"}})),
       "invalid_utf8", "field 'prompt' is not valid UTF-8"},
      {"max_tokens 0", framed(mb::pack(generate_with({{"max_tokens", 0}}))), "invalid_value",
       "field 'max_tokens' = 0 is out of range"},
      {"max_tokens negative", framed(mb::pack(generate_with({{"max_tokens", -3}}))), "invalid_value",
       "field 'max_tokens' = -3"},
      {"sampling out of range", framed(mb::pack(generate_with({{"top_p", 1.5}}))), "invalid_value",
       "field 'top_p' = 1.5"},
      {"id outside the vocabulary",
       framed(mb::pack(mb::map{{"v", 1}, {"type", "generate"}, {"id", "b"}, {"prompt_ids", mb::array{1, 9999}}})),
       "invalid_value", "'prompt_ids[1]' = 9999 is outside the vocabulary (size 4096)"},
      {"prompt longer than max_model_len",
       framed(mb::pack(mb::map{{"v", 1}, {"type", "generate"}, {"id", "b"}, {"prompt_ids", mb::array(64, mb::value(1))}})),
       "prompt_too_long", "prompt has 64 tokens; max_model_len is 64"},
      {"text without a tokenizer",
       framed(mb::pack(mb::map{{"v", 1}, {"type", "generate"}, {"id", "b"}, {"prompt", "hi"}})), "unsupported",
       "served without a tokenizer"},
  };
  for (const auto& k : cases) {
    BOOST_TEST_CONTEXT(k.name) {
      expect_error(bad, k.bytes, k.code, k.needle);
      still_usable(bad);
    }
  }
  // Errors name the request when its id could be read.
  auto e = expect_error(bad, framed(mb::pack(generate_with({{"bogus", 1}}))), "unknown_field", "'bogus'");
  BOOST_TEST(e.id == "b");

  std::vector<int32_t> got;
  while (auto t = keep_stream.next()) got.insert(got.end(), t->ids.begin(), t->ids.end());
  BOOST_TEST(got == reference(tiny_dense(), keep), boost::test_tools::per_element());
  BOOST_TEST(eventually([&] { return server_idle(*srv); }));
}

BOOST_AUTO_TEST_CASE(duplicate_request_id_on_one_connection) {
  auto c = test_config();
  c.max_model_len = 4096;
  auto srv = start(c);
  client::connection conn("127.0.0.1", srv->port());
  conn.send(ids_request("same", {1, 2}, 3000));
  conn.send(ids_request("same", {1, 2}, 5));
  bool saw_dup = false;
  for (int i = 0; i < 100 && !saw_dup; ++i) {
    auto ev = conn.next_event(std::chrono::seconds(10));
    BOOST_REQUIRE(ev.has_value());
    if (auto* e = std::get_if<wire::wire_error>(&*ev)) {
      BOOST_TEST(to_string(e->code) == "duplicate_id");
      BOOST_TEST(e->message == "request id 'same' is already running on this connection");
      saw_dup = true;
    }
  }
  BOOST_TEST(saw_dup);
  // The same id on another connection is fine.
  client::client other("127.0.0.1", srv->port());
  BOOST_TEST(other.complete(ids_request("same", {1, 2}, 3)).ids.size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_frame_over_the_limit_closes_only_that_connection) {
  auto c = test_config();
  c.max_frame_bytes = 1024;
  auto srv = start(c);
  client::client good("127.0.0.1", srv->port());
  auto keep = ids_request("keep", {1, 2, 3}, 20);
  auto keep_stream = good.generate(keep);
  client::connection bad("127.0.0.1", srv->port());
  std::string header;
  wire::append_frame_header(header, 1025);
  expect_error(bad, header + std::string(100, 'x'), "frame_too_large",
               "frame of 1025 bytes exceeds max_frame_bytes (1024)");
  BOOST_TEST(bad.closed_by_peer(std::chrono::seconds(5)));
  std::vector<int32_t> got;
  while (auto t = keep_stream.next()) got.insert(got.end(), t->ids.begin(), t->ids.end());
  BOOST_TEST(got == reference(tiny_dense(), keep), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(garbage_bytes_and_abrupt_close_never_hurt_the_server) {
  auto srv = start(test_config());
  std::mt19937 rng(3);
  for (int i = 0; i < 20; ++i) {
    client::connection c("127.0.0.1", srv->port());
    std::string junk(static_cast<size_t>(rng() % 300), '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    std::string bytes;
    wire::append_frame(bytes, junk);
    c.send_raw(bytes.substr(0, bytes.size() - rng() % 3));  // sometimes a truncated frame
  }
  client::client ok("127.0.0.1", srv->port());
  BOOST_TEST(ok.health().status == "ok");
  BOOST_TEST(ok.complete(ids_request("after", {7}, 4)).ids == reference(tiny_dense(), ids_request("after", {7}, 4)),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(per_connection_request_limit) {
  auto c = test_config();
  c.max_requests_per_connection = 2;
  c.max_model_len = 4096;
  auto srv = start(c);
  client::connection conn("127.0.0.1", srv->port());
  conn.send(ids_request("a", {1}, 3000));
  conn.send(ids_request("b", {1}, 3000));
  conn.send(ids_request("c", {1}, 3));
  for (int i = 0; i < 200; ++i) {
    auto ev = conn.next_event(std::chrono::seconds(10));
    BOOST_REQUIRE(ev.has_value());
    if (auto* e = std::get_if<wire::wire_error>(&*ev)) {
      BOOST_TEST(e->id == "c");
      BOOST_TEST(to_string(e->code) == "too_many_requests");
      return;
    }
  }
  BOOST_FAIL("no too_many_requests error");
}

// idle_timeout_ms: a client that connects and goes quiet, or sends half a frame and stops,
// gives its connection back (max_connections is finite), told why.
BOOST_AUTO_TEST_CASE(idle_and_half_sent_connections_are_closed_with_a_reason) {
  auto c = test_config();
  c.idle_timeout_ms = 300;
  auto srv = start(c);
  const auto t0 = std::chrono::steady_clock::now();
  client::connection silent("127.0.0.1", srv->port());
  client::connection half("127.0.0.1", srv->port());
  // `half` announces a 40-byte frame and dribbles it a byte every 50 ms for 3 s: bytes that never
  // make a request are no activity.
  std::string header;
  wire::append_frame_header(header, 40);
  half.send_raw(header);
  std::atomic<bool> stop{false};
  std::thread dribble([&] {
    for (int i = 0; i < 60 && !stop; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      try {
        half.send_raw("x");
      } catch (const std::exception&) {
        return;  // closed
      }
    }
  });
  for (auto* conn : {&silent, &half}) {
    auto ev = conn->next_event(std::chrono::seconds(10));
    BOOST_REQUIRE_MESSAGE(ev.has_value(), "an idle connection got no idle_timeout event");
    auto* e = std::get_if<wire::wire_error>(&*ev);
    BOOST_REQUIRE(e);
    BOOST_TEST(to_string(e->code) == "idle_timeout");
    BOOST_TEST(e->message.find("no request for 300 ms") != std::string::npos, e->message);
  }
  const auto told = std::chrono::steady_clock::now() - t0;
  stop = true;
  dribble.join();
  BOOST_TEST((told >= std::chrono::milliseconds(300)));
  BOOST_TEST((told < std::chrono::milliseconds(2500)), "the dribbling connection was kept too long");
  BOOST_TEST(silent.closed_by_peer(std::chrono::seconds(5)));
  BOOST_TEST(half.closed_by_peer(std::chrono::seconds(5)));
  BOOST_TEST(metric(*srv, "idle_connections_closed_total") == 2.0);
  BOOST_TEST(metric(*srv, "client_connections") == 0.0);
  // The server is fine, and a new client is served.
  client::client next("127.0.0.1", srv->port());
  BOOST_TEST(eventually([&] { return metric(*srv, "client_connections") == 1.0; }));
  BOOST_TEST(next.complete(ids_request("n", {1, 2, 3}, 4)).ids == reference(tiny_dense(), ids_request("n", {1, 2, 3}, 4)),
             boost::test_tools::per_element());
}

// Quiet means nothing running and no complete frame: a stream that outlasts the timeout many
// times over is never cut, a client that keeps asking is kept, and the quiet time starts when
// the last request ends.
BOOST_AUTO_TEST_CASE(only_connections_with_nothing_running_and_nothing_sent_are_idle) {
  auto c = test_config();
  c.idle_timeout_ms = 200;
  c.max_model_len = 8192;
  auto srv = start(c);
  client::client busy("127.0.0.1", srv->port());
  client::connection chatty("127.0.0.1", srv->port());
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, unanswered{0};
  std::thread asker([&] {  // a health request every 10 ms
    while (!stop) {
      chatty.send(wire::health_request{"h"});
      auto ev = chatty.next_event(std::chrono::seconds(10));
      (ev && std::holds_alternative<wire::health_event>(*ev) ? answered : unanswered)++;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  auto long_one = ids_request("long", {1, 2, 3}, 6000);  // ~1 s of decoding on the tiny model
  const auto t0 = std::chrono::steady_clock::now();
  auto got = busy.complete(long_one);
  const auto took = std::chrono::steady_clock::now() - t0;
  // The quiet time begins with the request's end, not with its frame (a second ago): 60 ms after
  // the end the connection is still open.
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  busy.raw().send(wire::health_request{"after"});
  auto after = busy.raw().next_event(std::chrono::seconds(10));
  BOOST_TEST((after.has_value() && std::holds_alternative<wire::health_event>(*after)));
  stop = true;
  asker.join();
  BOOST_TEST_MESSAGE("6000 tokens in " << std::chrono::duration<double>(took).count() << " s");
  BOOST_TEST((took >= std::chrono::milliseconds(400)), "the stream must outlast the timeout twice or more");
  BOOST_TEST((got.done.reason == wire::finish_reason::length));
  BOOST_TEST(got.ids == reference(tiny_dense(), long_one), boost::test_tools::per_element());
  BOOST_TEST(answered >= 10);
  BOOST_TEST(unanswered == 0);
  // Nothing running now: both connections are closed about 200 ms later, each told why.
  for (auto* conn : {&busy.raw(), &chatty}) {
    auto ev = conn->next_event(std::chrono::seconds(10));
    BOOST_REQUIRE(ev.has_value());
    auto* e = std::get_if<wire::wire_error>(&*ev);
    BOOST_REQUIRE(e);
    BOOST_TEST(to_string(e->code) == "idle_timeout");
    BOOST_TEST(conn->closed_by_peer(std::chrono::seconds(5)));
  }
}

BOOST_AUTO_TEST_SUITE_END()
