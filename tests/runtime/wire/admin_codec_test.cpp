// The admin request set_policy and its policy event: golden bytes, round trips, and each bad
// input with the error it gets.
#include <boost/test/unit_test.hpp>

#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/request_codec.hpp"
#include "tests/runtime/wire/msgpack_builder.hpp"

using namespace troupe::wire;
using test::map;

namespace {

void expect_error(const decoded_request& d, error_code code, const std::string& needle) {
  BOOST_REQUIRE_MESSAGE(!d.ok(), "expected error " << to_string(code) << ", decoding succeeded");
  BOOST_TEST(to_string(d.error.code) == to_string(code));
  BOOST_TEST(d.error.message.find(needle) != std::string::npos,
             "message '" << d.error.message << "' should contain '" << needle << "'");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(admin_codec)

BOOST_AUTO_TEST_CASE(golden_bytes_of_set_policy) {
  set_policy_request r{"s", "fair-share", "weight.a=3", "t0k"};
  // fixmap(6) "v":1 "type":"set_policy" "id":"s" "policy":"fair-share" "config":"weight.a=3" "token":"t0k"
  std::string expected =
      "\x86"
      "\xa1v\x01"
      "\xa4type\xaaset_policy"
      "\xa2id\xa1s"
      "\xa6policy\xaa" "fair-share"
      "\xa6" "config\xaaweight.a=3"
      "\xa5token\xa3t0k";
  BOOST_TEST(test::hex(encode_request(r)) == test::hex(expected));
  auto d = decode_request(expected);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  BOOST_TEST((std::get<set_policy_request>(*d.req) == r));
  BOOST_TEST(request_type(*d.req) == "set_policy");
}

BOOST_AUTO_TEST_CASE(set_policy_defaults) {
  auto d = decode_request(test::pack(map{{"v", 1}, {"type", "set_policy"}, {"policy", "/opt/p/x.so"}}));
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error.message);
  const auto& r = std::get<set_policy_request>(*d.req);
  BOOST_TEST(r.id.empty());
  BOOST_TEST(r.policy == "/opt/p/x.so");
  BOOST_TEST(r.config.empty());
  BOOST_TEST(r.token.empty());
}

BOOST_AUTO_TEST_CASE(set_policy_bad_input) {
  expect_error(decode_request(test::pack(map{{"v", 1}, {"type", "set_policy"}, {"id", "a"}})),
               error_code::missing_field, "needs field 'policy'");
  expect_error(decode_request(test::pack(map{{"v", 1}, {"type", "set_policy"}, {"policy", ""}})),
               error_code::invalid_value, "field 'policy' must not be empty");
  expect_error(decode_request(test::pack(map{{"v", 1}, {"type", "set_policy"}, {"policy", 3}})),
               error_code::wrong_type, "field 'policy' must be a string");
  expect_error(decode_request(test::pack(map{{"v", 1}, {"type", "set_policy"}, {"policy", "fcfs"}, {"weights", "a"}})),
               error_code::unknown_field, "unknown field 'weights' in a set_policy request");
  expect_error(decode_request(test::pack(map{{"v", 1}, {"type", "set_policy"}, {"policy", std::string(4097, 'p')}})),
               error_code::invalid_value, "field 'policy' has 4097 bytes; at most 4096");
  expect_error(decode_request(test::pack(map{{"v", 1}, {"type", "frobnicate"}})), error_code::unknown_type,
               "expected generate, embed, rerank, cancel, tokenize, health, models or set_policy");
}

BOOST_AUTO_TEST_CASE(policy_event_and_forbidden_round_trip) {
  policy_event e{"s", "fair-share", "fcfs"};
  // fixmap(5) "v":1 "event":"policy" "id":"s" "policy":"fair-share" "previous":"fcfs"
  std::string expected =
      "\x85"
      "\xa1v\x01"
      "\xa5" "event\xa6policy"
      "\xa2id\xa1s"
      "\xa6policy\xaa" "fair-share"
      "\xa8previous\xa4" "fcfs";
  BOOST_TEST(test::hex(encode_event(e)) == test::hex(expected));
  auto d = decode_event(expected);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.error);
  BOOST_TEST((std::get<policy_event>(*d.ev) == e));
  BOOST_TEST(to_string(error_code::forbidden) == "forbidden");
  BOOST_TEST((parse_error_code("forbidden") == error_code::forbidden));
  BOOST_TEST(to_string(error_code::internal) == "internal");
  auto err = decode_event(encode_event(wire_error{error_code::forbidden, "wrong admin token", "s"}));
  BOOST_REQUIRE(err.ok());
  BOOST_TEST((std::get<wire_error>(*err.ev).code == error_code::forbidden));
}

BOOST_AUTO_TEST_SUITE_END()
