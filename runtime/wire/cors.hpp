// Cross-origin resource sharing for the HTTP API, as vLLM serves it (FastAPI / Starlette's
// CORSMiddleware with vLLM's --allowed-origins, --allowed-methods, --allowed-headers and
// --allow-credentials): a browser page from another origin may call the API when its origin is
// allowed. A request with an Origin header gets Access-Control-Allow-Origin (and friends) on its
// answer; a preflight (OPTIONS with Access-Control-Request-Method) is answered here, before any
// route or API key. Without an Origin header nothing changes. Off unless origins are listed
// (vLLM allows every origin by default; a loopback server stays out of arbitrary pages' reach).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/wire/http.hpp"

namespace troupe::wire {

struct cors_policy {
  std::vector<std::string> origins;       // "*": any origin; none: CORS off (no lines, no preflights)
  std::vector<std::string> methods{"*"};  // "*": any method
  std::vector<std::string> headers{"*"};  // "*": any request header
  bool allow_credentials = false;
  bool enabled() const { return !origins.empty(); }
  bool any_origin() const;
  bool any_method() const;
  bool any_header() const;
};

// A list as vLLM's flags take it (a JSON array of strings: ["https://a.example", "..."]) or as a
// config line (comma-separated). Throws troupe::error(invalid_argument) naming `field`.
std::vector<std::string> parse_cors_list(std::string_view text, std::string_view field);

// Extra header lines ("Name: value\r\n" each) for the answer to `req`: empty when the request has
// no Origin header or its origin is not allowed (the browser then withholds the answer).
std::string cors_headers(const cors_policy& p, const http_request& req);

// True for a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_cors_preflight(const http_request& req);

struct cors_preflight_answer {
  int status = 200;          // 400 when the origin, method or a header is not allowed
  std::string headers;       // extra header lines
  std::string body;          // "OK", or what was disallowed
};
cors_preflight_answer answer_cors_preflight(const cors_policy& p, const http_request& req);

}  // namespace troupe::wire
