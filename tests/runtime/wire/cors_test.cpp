// CORS as vLLM's middleware (Starlette's CORSMiddleware) answers it: which header lines a request
// with an Origin gets, how a preflight is answered or refused, and how the lists are read.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/wire/cors.hpp"

namespace wire = troupe::wire;

namespace {

wire::http_request request(std::string method, std::vector<std::pair<std::string, std::string>> headers) {
  wire::http_request r;
  r.method = std::move(method);
  r.target = "/v1/chat/completions";
  r.headers = std::move(headers);
  return r;
}

bool has(const std::string& lines, const std::string& line) { return lines.find(line + "\r\n") != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(cors)

BOOST_AUTO_TEST_CASE(a_request_without_origin_gets_nothing_and_any_origin_gets_a_star) {
  wire::cors_policy any;  // vLLM's defaults: "*" everywhere, no credentials
  any.origins = {"*"};
  BOOST_TEST(wire::cors_headers(any, request("POST", {})).empty());
  const auto lines = wire::cors_headers(any, request("POST", {{"origin", "https://app.example"}}));
  BOOST_TEST(lines == "Access-Control-Allow-Origin: *\r\n");
  BOOST_TEST(!wire::is_cors_preflight(request("OPTIONS", {{"origin", "https://app.example"}})));  // no method asked
  BOOST_TEST(!wire::is_cors_preflight(request("POST", {{"origin", "x"}, {"access-control-request-method", "POST"}})));
}

BOOST_AUTO_TEST_CASE(listed_origins_are_echoed_and_others_get_nothing) {
  wire::cors_policy p;
  p.origins = {"https://app.example", "http://localhost:3000"};
  const auto lines = wire::cors_headers(p, request("GET", {{"origin", "http://localhost:3000"}}));
  BOOST_TEST(has(lines, "Access-Control-Allow-Origin: http://localhost:3000"));
  BOOST_TEST(has(lines, "Vary: Origin"));  // caches must not hand one origin's answer to another
  BOOST_TEST(!has(lines, "Access-Control-Allow-Credentials: true"));
  BOOST_TEST(wire::cors_headers(p, request("GET", {{"origin", "https://evil.example"}})).empty());
  // Credentials: never "*" (browsers refuse it), the origin echoed instead.
  wire::cors_policy c;
  c.origins = {"*"};
  c.allow_credentials = true;
  const auto with = wire::cors_headers(c, request("GET", {{"origin", "https://app.example"}}));
  BOOST_TEST(has(with, "Access-Control-Allow-Origin: https://app.example"));
  BOOST_TEST(has(with, "Access-Control-Allow-Credentials: true"));
}

BOOST_AUTO_TEST_CASE(preflights_are_answered_or_refused_like_starlette) {
  wire::cors_policy any;
  any.origins = {"*"};
  auto pre = [](std::string origin, std::string method, std::string headers) {
    std::vector<std::pair<std::string, std::string>> h{{"origin", origin}, {"access-control-request-method", method}};
    if (!headers.empty()) h.emplace_back("access-control-request-headers", headers);
    return request("OPTIONS", h);
  };
  auto a = wire::answer_cors_preflight(any, pre("https://app.example", "POST", "authorization, content-type"));
  BOOST_TEST(a.status == 200);
  BOOST_TEST(a.body == "OK");
  BOOST_TEST(has(a.headers, "Access-Control-Allow-Origin: *"));
  BOOST_TEST(has(a.headers, "Access-Control-Allow-Methods: DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"));
  BOOST_TEST(has(a.headers, "Access-Control-Allow-Headers: authorization, content-type"));  // "*" echoes the ask
  BOOST_TEST(has(a.headers, "Access-Control-Max-Age: 600"));

  wire::cors_policy strict;
  strict.origins = {"https://app.example"};
  strict.methods = {"GET", "POST"};
  strict.headers = {"Authorization"};
  a = wire::answer_cors_preflight(strict, pre("https://app.example", "POST", "authorization, Content-Type"));
  BOOST_TEST(a.status == 200, a.body);  // content-type is safelisted; names compare case-blind
  BOOST_TEST(has(a.headers, "Access-Control-Allow-Methods: GET, POST"));
  BOOST_TEST(has(a.headers, "Access-Control-Allow-Headers: Authorization"));
  a = wire::answer_cors_preflight(strict, pre("https://app.example", "DELETE", ""));
  BOOST_TEST(a.status == 400);
  BOOST_TEST(a.body == "Disallowed CORS method");
  a = wire::answer_cors_preflight(strict, pre("https://evil.example", "DELETE", "x-secret"));
  BOOST_TEST(a.status == 400);
  BOOST_TEST(a.body == "Disallowed CORS origin, method, headers");
  BOOST_TEST(a.headers.empty());  // no allowed origin, no CORS lines
}

// Nothing of a request is echoed unless printable (the HTTP parser refuses CR/LF/NUL already),
// and a client's malformed header list is a refusal, never an exception.
BOOST_AUTO_TEST_CASE(odd_request_values_are_refused_not_echoed) {
  wire::cors_policy c;
  c.origins = {"*"};
  c.allow_credentials = true;  // echoes the origin
  BOOST_TEST(wire::cors_headers(c, request("GET", {{"origin", "https://a\x01"}})).empty());
  auto pre = [](std::string headers) {
    return request("OPTIONS", {{"origin", "https://a.example"}, {"access-control-request-method", "POST"},
                               {"access-control-request-headers", headers}});
  };
  auto a = wire::answer_cors_preflight(c, pre("x-a\x7f"));
  BOOST_TEST(a.status == 400);
  BOOST_TEST(a.body == "Disallowed CORS headers");
  wire::cors_policy strict;
  strict.origins = {"https://a.example"};
  strict.headers = {"x-a"};
  a = wire::answer_cors_preflight(strict, pre("x-a, x b, ,"));
  BOOST_TEST(a.status == 400);
  BOOST_TEST(a.body == "Disallowed CORS headers");
  a = wire::answer_cors_preflight(strict, pre(" X-A , ,accept"));
  BOOST_TEST(a.status == 200, a.body);
}

BOOST_AUTO_TEST_CASE(lists_read_as_json_or_comma_separated_and_bad_ones_name_the_field) {
  using V = std::vector<std::string>;
  BOOST_TEST((wire::parse_cors_list(R"(["https://a.example", "http://b:3000"])", "f") == V{"https://a.example", "http://b:3000"}));
  BOOST_TEST((wire::parse_cors_list(" https://a.example ,http://b:3000,", "f") == V{"https://a.example", "http://b:3000"}));
  BOOST_TEST((wire::parse_cors_list("*", "f") == V{"*"}));
  BOOST_TEST(wire::parse_cors_list("", "f").empty());  // nothing allowed
  for (const char* bad : {"[1, 2]", "[\"a\"", "[\"has space\"]", "a b"}) {
    try {
      wire::parse_cors_list(bad, "server.allowed_origins");
      BOOST_ERROR("accepted " << bad);
    } catch (const troupe::error& e) {
      BOOST_TEST(std::string(e.what()).find("server.allowed_origins") != std::string::npos, e.what());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
