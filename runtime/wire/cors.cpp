#include "runtime/wire/cors.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"

namespace troupe::wire {

namespace {

bool has_star(const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), "*") != v.end(); }

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// The non-empty entries of a comma-separated list, trimmed.
std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    if (std::string s = trim(text.substr(at, comma - at)); !s.empty()) out.push_back(std::move(s));
    at = comma + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Starlette's: the methods a "*" stands for in Access-Control-Allow-Methods.
const std::vector<std::string> kAllMethods = {"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"};
// Headers a browser may always send (CORS-safelisted); Starlette allows them whatever the list.
const std::vector<std::string> kSafelisted = {"accept", "accept-language", "content-language", "content-type"};

// Printable ASCII (and spaces) only: what an answer may echo of a request's headers.
bool echoable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

bool origin_allowed(const cors_policy& p, const std::string& origin) {
  if (!echoable(origin)) return false;
  return p.any_origin() || std::find(p.origins.begin(), p.origins.end(), origin) != p.origins.end();
}

// Access-Control-Allow-Origin and what goes with it, for an allowed origin.
std::string origin_lines(const cors_policy& p, const std::string& origin) {
  std::string out;
  // "*" cannot go with credentials (browsers refuse it), and an echoed origin must vary by Origin.
  if (p.any_origin() && !p.allow_credentials) {
    out += "Access-Control-Allow-Origin: *\r\n";
  } else {
    out += "Access-Control-Allow-Origin: " + origin + "\r\nVary: Origin\r\n";
  }
  if (p.allow_credentials) out += "Access-Control-Allow-Credentials: true\r\n";
  return out;
}

}  // namespace

bool cors_policy::any_origin() const { return has_star(origins); }
bool cors_policy::any_method() const { return has_star(methods); }
bool cors_policy::any_header() const { return has_star(headers); }

std::vector<std::string> parse_cors_list(std::string_view text, std::string_view field) {
  std::vector<std::string> out;
  const std::string t = trim(text);
  if (!t.empty() && t.front() == '[') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(t);
    } catch (const nlohmann::json::exception& e) {
      throw_error(errc::invalid_argument, std::string(field) + ": not a JSON list of strings: " + e.what());
    }
    for (const auto& v : j) {
      if (!v.is_string())
        throw_error(errc::invalid_argument, std::string(field) + ": every entry must be a string, not " + v.type_name());
      out.push_back(trim(v.get<std::string>()));
    }
  } else {
    out = split_list(t);
  }
  for (const auto& s : out) {
    if (s.empty()) throw_error(errc::invalid_argument, std::string(field) + ": an entry is empty");
    for (char c : s)
      if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f)
        throw_error(errc::invalid_argument, std::string(field) + ": '" + s + "' holds a space or control character");
  }
  return out;
}

std::string cors_headers(const cors_policy& p, const http_request& req) {
  const std::string* origin = req.header("origin");
  if (!origin || !origin_allowed(p, *origin)) return {};
  return origin_lines(p, *origin);
}

bool is_cors_preflight(const http_request& req) {
  return req.method == "OPTIONS" && req.header("origin") && req.header("access-control-request-method");
}

cors_preflight_answer answer_cors_preflight(const cors_policy& p, const http_request& req) {
  cors_preflight_answer a;
  const std::string& origin = *req.header("origin");
  const std::string& method = *req.header("access-control-request-method");
  std::vector<std::string> failures;
  if (!origin_allowed(p, origin)) failures.push_back("origin");
  if (!p.any_method() && std::find(p.methods.begin(), p.methods.end(), method) == p.methods.end())
    failures.push_back("method");
  std::string requested;
  if (const std::string* h = req.header("access-control-request-headers")) requested = *h;
  if (!echoable(requested)) {
    failures.push_back("headers");
  } else if (!p.any_header()) {
    // The client's list, read leniently (a malformed name is simply not allowed; never a throw).
    for (const auto& name : split_list(requested)) {
      const std::string l = ascii_lower(name);
      const bool ok = std::find(kSafelisted.begin(), kSafelisted.end(), l) != kSafelisted.end() ||
                      std::any_of(p.headers.begin(), p.headers.end(), [&](const std::string& x) { return ascii_lower(x) == l; });
      if (!ok) {
        failures.push_back("headers");
        break;
      }
    }
  }
  // Starlette answers a disallowed preflight 400 "Disallowed CORS origin, method" (the browser
  // then refuses the real request), still with the CORS lines of an allowed origin.
  if (origin_allowed(p, origin)) a.headers = origin_lines(p, origin);
  if (!failures.empty()) {
    a.status = 400;
    a.body = "Disallowed CORS " + join(failures);
    return a;
  }
  a.headers += "Access-Control-Allow-Methods: " + join(p.any_method() ? kAllMethods : p.methods) + "\r\n";
  // "*" echoes what was asked (a literal "*" does not cover Authorization for browsers).
  const std::string allowed = p.any_header() ? requested : join(p.headers);
  if (!allowed.empty()) a.headers += "Access-Control-Allow-Headers: " + allowed + "\r\n";
  a.headers += "Access-Control-Max-Age: 600\r\n";
  a.body = "OK";
  return a;
}

}  // namespace troupe::wire
