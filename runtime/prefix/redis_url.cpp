#include "runtime/prefix/redis_url.hpp"

#include <charconv>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

namespace {

// The URL as it may appear in an error: everything between "//" and the last '@' hidden.
std::string hide_credentials(std::string_view url) {
  auto scheme = url.find("://");
  auto at = url.rfind('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme) return std::string(url);
  return std::string(url.substr(0, scheme + 3)) + "***" + std::string(url.substr(at));
}

[[noreturn]] void bad(std::string_view url, const std::string& why) {
  throw_error(errc::invalid_argument, "--redis \"" + hide_credentials(url) + "\": " + why +
                                          " (expected redis://[[user]:password@]host[:port][/db] or "
                                          "unix://[[user]:password@]/path/to.sock[?db=N])");
}

std::string percent_decode(std::string_view url, std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0) bad(url, "bad percent escape in the credentials");
    out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
    i += 2;
  }
  return out;
}

int32_t number(std::string_view url, std::string_view s, const char* what, int32_t lo, int32_t hi) {
  int32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    bad(url, std::string(what) + " \"" + std::string(s) + "\" is not a number in " + std::to_string(lo) + ".." +
                 std::to_string(hi));
  return v;
}

}  // namespace

std::string redis_url::redacted() const {
  std::string creds;
  if (!user.empty() || !password.empty()) creds = user + (password.empty() ? "" : ":***") + "@";
  if (unix_socket) return "unix://" + creds + path + (db ? "?db=" + std::to_string(db) : "");
  bool v6 = host.find(':') != std::string::npos;
  return "redis://" + creds + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" + std::to_string(db);
}

redis_url parse_redis_url(std::string_view url) {
  redis_url u;
  std::string_view rest;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else if (url.starts_with("unix://")) {
    u.unix_socket = true;
    rest = url.substr(7);
  } else {
    bad(url, "unknown scheme");
  }
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    auto creds = rest.substr(0, at);
    rest = rest.substr(at + 1);
    auto colon = creds.find(':');
    if (colon == std::string_view::npos) {
      u.password = percent_decode(url, creds);  // redis://secret@host: a bare password, as redis-cli takes it
    } else {
      u.user = percent_decode(url, creds.substr(0, colon));
      u.password = percent_decode(url, creds.substr(colon + 1));
    }
    if (u.password.empty() && !u.user.empty()) bad(url, "a user needs a password");
  }
  if (u.unix_socket) {
    auto q = rest.find('?');
    u.path = std::string(rest.substr(0, q));
    if (u.path.empty() || u.path[0] != '/') bad(url, "the socket path must be absolute");
    if (q != std::string_view::npos) {
      auto query = rest.substr(q + 1);
      if (!query.starts_with("db=")) bad(url, "the only query parameter is db=N");
      u.db = number(url, query.substr(3), "db", 0, 1 << 20);
    }
    return u;
  }
  std::string_view hostport = rest, db;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    db = rest.substr(slash + 1);
  }
  std::string_view port;
  if (hostport.starts_with("[")) {
    auto close = hostport.find(']');
    if (close == std::string_view::npos) bad(url, "unclosed '[' in the host");
    u.host = std::string(hostport.substr(1, close - 1));
    auto after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad(url, "expected ':' after ']'");
      port = after.substr(1);
      if (port.empty()) bad(url, "empty port");
    }
  } else {
    auto colon = hostport.find(':');
    u.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) bad(url, "empty port");
    }
  }
  if (u.host.empty()) bad(url, "no host");
  if (!port.empty()) u.port = number(url, port, "port", 1, 65535);
  if (!db.empty()) u.db = number(url, db, "db", 0, 1 << 20);
  return u;
}

}  // namespace troupe::prefix
