// HTTP/1.1 request parsing: heads and bodies across arbitrary splits, pipelining, every refusal
// with its status, 100-continue, and the response framing.
#include <boost/test/unit_test.hpp>

#include "runtime/wire/http.hpp"

using troupe::wire::http_request;
using troupe::wire::http_request_parser;
using status = http_request_parser::status;
BOOST_TEST_DONT_PRINT_LOG_VALUE(status)

namespace {

// Feeds `bytes` one at a time and returns every request parsed (stops at an error).
std::vector<http_request> parse_bytewise(http_request_parser& p, std::string_view bytes) {
  std::vector<http_request> out;
  for (char c : bytes) {
    p.feed(std::string_view(&c, 1));
    http_request r;
    for (;;) {
      auto s = p.next(r);
      if (s == status::request) {
        out.push_back(r);
        continue;
      }
      break;
    }
  }
  return out;
}

status first_status(std::string_view bytes, size_t max_head = 4096, size_t max_body = 1024) {
  http_request_parser p(max_head, max_body);
  p.feed(bytes);
  http_request r;
  return p.next(r);
}

int error_of(std::string_view bytes, size_t max_head = 4096, size_t max_body = 1024) {
  http_request_parser p(max_head, max_body);
  p.feed(bytes);
  http_request r;
  BOOST_TEST_REQUIRE((p.next(r) == status::error));
  BOOST_TEST(!p.error_message().empty());
  return p.error_status();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(http)

BOOST_AUTO_TEST_CASE(pipelined_requests_split_byte_by_byte) {
  const std::string stream =
      "GET /v1/models HTTP/1.1\r\nHost: x\r\nAccept:  */*  \r\n\r\n"
      "POST /v1/completions?a=1 HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      "{\"x\": true}"
      "\r\nGET /health HTTP/1.1\r\nConnection: close\r\n\r\n";
  http_request_parser p(4096, 1024);
  auto got = parse_bytewise(p, stream);
  BOOST_TEST_REQUIRE(got.size() == 3u);
  BOOST_TEST(got[0].method == "GET");
  BOOST_TEST(got[0].target == "/v1/models");
  BOOST_TEST(*got[0].header("accept") == "*/*");
  BOOST_TEST(got[0].header("content-length") == nullptr);
  BOOST_TEST(got[0].body.empty());
  BOOST_TEST(got[0].keep_alive);
  BOOST_TEST(got[1].method == "POST");
  BOOST_TEST(got[1].path() == "/v1/completions");
  BOOST_TEST(*got[1].header("content-type") == "application/json");
  BOOST_TEST(got[1].body == "{\"x\": true}");
  BOOST_TEST(got[2].path() == "/health");  // after a stray CRLF, as RFC 9112 allows
  BOOST_TEST(!got[2].keep_alive);
  BOOST_TEST(p.buffered_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(http10_closes_unless_asked_to_keep_alive) {
  http_request_parser p(4096, 1024);
  p.feed("GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  http_request a, b;
  BOOST_TEST_REQUIRE((p.next(a) == status::request));
  BOOST_TEST_REQUIRE((p.next(b) == status::request));
  BOOST_TEST(!a.keep_alive);
  BOOST_TEST(b.keep_alive);
}

BOOST_AUTO_TEST_CASE(a_body_waits_for_all_its_bytes) {
  http_request_parser p(4096, 1024);
  p.feed("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nab");
  http_request r;
  BOOST_TEST((p.next(r) == status::need_more));
  BOOST_TEST((p.next(r) == status::need_more));
  p.feed("cdeGET");
  BOOST_TEST_REQUIRE((p.next(r) == status::request));
  BOOST_TEST(r.body == "abcde");
  BOOST_TEST((p.next(r) == status::need_more));
  BOOST_TEST(p.buffered_bytes() == 3u);
}

BOOST_AUTO_TEST_CASE(expect_continue_is_answered_once) {
  http_request_parser p(4096, 1024);
  p.feed("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  http_request r;
  BOOST_TEST((p.next(r) == status::send_continue));
  BOOST_TEST((p.next(r) == status::need_more));
  p.feed("{}");
  BOOST_TEST((p.next(r) == status::request));
  // With the body already there no 100 is due.
  p.feed("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}");
  BOOST_TEST((p.next(r) == status::request));
}

BOOST_AUTO_TEST_CASE(refusals_carry_their_status) {
  BOOST_TEST(error_of("GET / HTTP/1.1\r\nX: " + std::string(5000, 'a') + "\r\n\r\n") == 431);
  BOOST_TEST(error_of("GET / HTTP/1.1\r\nX: " + std::string(5000, 'a')) == 431);  // no end in sight
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nContent-Length: 1025\r\n\r\n") == 413);  // before the body
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 501);
  BOOST_TEST(error_of("GET / HTTP/2.0\r\n\r\n") == 505);
  BOOST_TEST(error_of("GET / FTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(error_of("GET /\r\n\r\n") == 400);
  BOOST_TEST(error_of("GET  / HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(error_of("GET http://x/ HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(error_of("G(T / HTTP/1.1\r\n\r\n") == 400);
  BOOST_TEST(error_of("GET / HTTP/1.1\r\nNo colon here\r\n\r\n") == 400);
  BOOST_TEST(error_of("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n") == 400);
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n") == 400);
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == 400);
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n") == 400);
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n") == 400);
  BOOST_TEST(error_of("POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n") == 400);
  // A bare CR, LF or NUL in a value (an echoed Origin would split the answer's headers).
  BOOST_TEST(error_of("GET / HTTP/1.1\r\nOrigin: https://a\nSet-Cookie: x=1\r\n\r\n") == 400);
  BOOST_TEST(error_of("GET / HTTP/1.1\r\nOrigin: https://a\rb\r\n\r\n") == 400);
  BOOST_TEST(error_of(std::string("GET / HTTP/1.1\r\nOrigin: a\0b\r\n\r\n", 31)) == 400);
  // Within the limits all of these are fine.
  BOOST_TEST((first_status("POST / HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n{}") == status::request));
  BOOST_TEST((first_status("POST / HTTP/1.1\r\nContent-Length: 1024\r\n\r\n" + std::string(1024, 'x')) == status::request));
}

BOOST_AUTO_TEST_CASE(after_an_error_the_parser_stays_broken) {
  http_request_parser p(4096, 1024);
  p.feed("BAD\r\n\r\n");
  http_request r;
  BOOST_TEST((p.next(r) == status::error));
  p.feed("GET / HTTP/1.1\r\n\r\n");
  BOOST_TEST((p.next(r) == status::error));
  BOOST_TEST(p.error_status() == 400);
}

BOOST_AUTO_TEST_CASE(response_framing) {
  auto r = troupe::wire::http_response(404, "application/json", "{}", false);
  BOOST_TEST(r == "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}");
  BOOST_TEST(troupe::wire::http_response(200, "text/plain", "OK", true, "Vary: Origin\r\n") ==
             "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\nContent-Length: 2\r\n"
             "Vary: Origin\r\n\r\nOK");
  auto h = troupe::wire::http_stream_head(200, "text/event-stream", true);
  BOOST_TEST(h.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  BOOST_TEST(h.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
  BOOST_TEST(h.substr(h.size() - 4) == "\r\n\r\n");
  std::string body;
  troupe::wire::append_http_chunk(body, std::string(26, 'z'));
  troupe::wire::append_http_chunk(body, "");  // nothing: an empty chunk would end the stream
  troupe::wire::append_http_last_chunk(body);
  BOOST_TEST(body == "1a\r\n" + std::string(26, 'z') + "\r\n0\r\n\r\n");
}

BOOST_AUTO_TEST_CASE(query_parameters_are_found_and_decoded) {
  troupe::wire::http_request r;
  r.target = "/v1/responses/resp_1/input_items?limit=5&order=asc&after=msg%5F1&q=a+b&empty=&bad=%zz";
  BOOST_TEST(r.path() == "/v1/responses/resp_1/input_items");
  BOOST_TEST(*r.query("limit") == "5");
  BOOST_TEST(*r.query("order") == "asc");
  BOOST_TEST(*r.query("after") == "msg_1");
  BOOST_TEST(*r.query("q") == "a b");
  BOOST_TEST(*r.query("empty") == "");
  BOOST_TEST(*r.query("bad") == "%zz");  // not an escape: kept as it is
  BOOST_TEST(!r.query("missing"));
  r.target = "/v1/models";
  BOOST_TEST(!r.query("limit"));
  // A path's escapes: '+' stays '+' there; a cut or malformed escape stays as it is.
  BOOST_TEST(troupe::wire::percent_decode("Qwen%2FQwen3+8B%2", false) == "Qwen/Qwen3+8B%2");
  BOOST_TEST(troupe::wire::percent_decode("a+b%41%4", true) == "a bA%4");
}

BOOST_AUTO_TEST_SUITE_END()
