// Parses the --redis option: redis://[[user]:password@]host[:port][/db] (IPv6 hosts in brackets)
// or unix://[[user]:password@]/path/to.sock[?db=N]. User and password may be percent-encoded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::prefix {

struct redis_url {
  bool unix_socket = false;
  std::string host;      // TCP
  int32_t port = 6379;   // TCP
  std::string path;      // unix socket
  std::string user;      // empty: AUTH <password> (the default user)
  std::string password;  // empty: no AUTH
  int32_t db = 0;

  // The URL with the password replaced by "***", for logs and banners.
  std::string redacted() const;
};

// Throws troupe::error(invalid_argument) naming the URL (password redacted) and what is wrong.
redis_url parse_redis_url(std::string_view url);

}  // namespace troupe::prefix
