// HTTP/1.1 as the OpenAI-compatible endpoint needs it (docs/openai_api.md): requests cut from a
// byte stream with bounded headers and a Content-Length body, and the response framing (a whole
// body, or a chunked stream of server-sent events). Strict like the msgpack decoder: anything it
// cannot read is a status code and a message saying what, never a guess.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::wire {

struct http_request {
  std::string method;  // GET, POST, ...
  std::string target;  // "/v1/chat/completions" (the query string, if any, is kept)
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 default; "Connection: close" (or HTTP/1.0 without keep-alive) clears it
  // The value of header `name` (lower-case), or nullptr.
  const std::string* header(std::string_view name) const;
  // target without its query string
  std::string_view path() const;
  // The query string's parameter `name`, percent-decoded ('+' as a space); nothing when absent.
  std::optional<std::string> query(std::string_view name) const;
};

class http_request_parser {
 public:
  enum class status : unsigned char {
    request,        // `out` holds the next request
    need_more,      // no complete request buffered
    send_continue,  // a head with "Expect: 100-continue" waits for its body: answer 100 Continue
    error,          // the stream cannot be read on: answer error_status() and close
  };

  http_request_parser(size_t max_header_bytes, size_t max_body_bytes)
      : max_header_bytes_(max_header_bytes), max_body_bytes_(max_body_bytes) {}

  void feed(std::string_view bytes);
  status next(http_request& out);

  int error_status() const noexcept { return error_status_; }  // 400, 413, 431, 501, 505
  const std::string& error_message() const noexcept { return error_message_; }
  size_t buffered_bytes() const noexcept { return buf_.size() - pos_; }

 private:
  status fail(int code, std::string message);
  status parse_head(size_t head_end);

  size_t max_header_bytes_, max_body_bytes_;
  bool have_head_ = false;  // head_ parsed, waiting for body_bytes_ of body
  bool continue_answered_ = false;
  http_request head_;
  size_t body_bytes_ = 0;
  std::string buf_;
  size_t pos_ = 0;
  int error_status_ = 0;
  std::string error_message_;
};

// s with A-Z as a-z (header names and tokens compare case-blind).
std::string ascii_lower(std::string_view s);

// "200 OK", "404 Not Found", ... (the reason phrases of the codes the server sends).
std::string_view http_status_line(int status) noexcept;

// A whole response with Content-Length. extra_headers: more header lines, each ending in CRLF
// (cors.hpp's).
std::string http_response(int status, std::string_view content_type, std::string_view body, bool keep_alive,
                          std::string_view extra_headers = {});
// The head of a streamed response (Transfer-Encoding: chunked); then http_chunk per piece and
// http_last_chunk at the end.
// %XX escapes decoded (a malformed one kept as it is); '+' as a space in a query string only.
std::string percent_decode(std::string_view s, bool plus_is_space);

std::string http_stream_head(int status, std::string_view content_type, bool keep_alive,
                             std::string_view extra_headers = {});
void append_http_chunk(std::string& out, std::string_view data);  // nothing for empty data
void append_http_last_chunk(std::string& out);

}  // namespace troupe::wire
