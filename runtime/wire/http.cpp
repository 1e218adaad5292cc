#include "runtime/wire/http.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace troupe::wire {

namespace {

bool is_token_char(char c) {
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Does the comma-separated header value hold `token` (case-insensitive)?
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    auto comma = value.find(',');
    if (ascii_lower(trim(value.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

const std::string* http_request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return &v;
  return nullptr;
}

std::string_view http_request::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (plus_is_space && s[i] == '+') out += ' ';
    else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<std::string> http_request::query(std::string_view name) const {
  const size_t q = target.find('?');
  if (q == std::string::npos) return std::nullopt;
  auto decode = [](std::string_view s) { return percent_decode(s, true); };
  std::string_view rest = std::string_view(target).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (decode(pair.substr(0, eq)) == name) return decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

void http_request_parser::feed(std::string_view bytes) {
  if (error_status_) return;
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

http_request_parser::status http_request_parser::fail(int code, std::string message) {
  error_status_ = code;
  error_message_ = std::move(message);
  buf_.clear();
  pos_ = 0;
  return status::error;
}

http_request_parser::status http_request_parser::parse_head(size_t head_end) {
  std::string_view head(buf_.data() + pos_, head_end - pos_);
  pos_ = head_end + 4;
  head_ = http_request{};
  auto eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 2);

  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
  auto method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1), version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "the request method is not an HTTP token");
  if (target.empty() || target.front() != '/') return fail(400, "the request target must be a path starting with '/'");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "the request target has a control character");
  bool http10 = false;
  if (version == "HTTP/1.0")
    http10 = true;
  else if (version != "HTTP/1.1")
    return fail(version.rfind("HTTP/", 0) == 0 ? 505 : 400,
                "HTTP version '" + std::string(version.substr(0, 16)) + "' is not served here (HTTP/1.1 is)");
  head_.method = method;
  head_.target = target;

  bool have_length = false, expect_continue = false;
  size_t length = 0;
  std::string_view connection;
  while (!head.empty()) {
    eol = head.find("\r\n");
    std::string_view h = head.substr(0, eol);
    head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 2);
    if (h.front() == ' ' || h.front() == '\t') return fail(400, "folded header lines are not allowed");
    auto colon = h.find(':');
    if (colon == std::string_view::npos || !is_token(h.substr(0, colon)))
      return fail(400, "header line '" + std::string(h.substr(0, 64)) + "' is not 'Name: value'");
    std::string name = ascii_lower(h.substr(0, colon));
    std::string_view value = trim(h.substr(colon + 1));
    // RFC 9110 5.5: no CR, LF or NUL in a field value (a bare one could split an echoed header).
    if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
      return fail(400, "header '" + name.substr(0, 64) + "' holds a CR, LF or NUL character");
    if (name == "transfer-encoding")
      return fail(501, "request bodies with Transfer-Encoding are not supported; send Content-Length");
    if (name == "content-length") {
      size_t n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || ec != std::errc() || p != value.data() + value.size())
        return fail(400, "Content-Length '" + std::string(value.substr(0, 32)) + "' is not a number");
      if (have_length && n != length) return fail(400, "two different Content-Length headers");
      have_length = true;
      length = n;
    }
    if (name == "expect") {
      if (ascii_lower(value) != "100-continue") return fail(400, "Expect: '" + std::string(value.substr(0, 32)) + "' is not supported");
      expect_continue = true;
    }
    if (name == "connection") connection = value;
    head_.headers.emplace_back(std::move(name), std::string(value));
  }
  if (length > max_body_bytes_)
    return fail(413, "the request body of " + std::to_string(length) + " bytes exceeds max_frame_bytes (" +
                         std::to_string(max_body_bytes_) + ")");
  head_.keep_alive = http10 ? has_token(connection, "keep-alive") : !has_token(connection, "close");
  have_head_ = true;
  body_bytes_ = length;
  continue_answered_ = !expect_continue;
  return status::need_more;
}

http_request_parser::status http_request_parser::next(http_request& out) {
  if (error_status_) return status::error;
  if (!have_head_) {
    // Empty lines before a request line are ignored (RFC 9112 2.2).
    while (buf_.size() - pos_ >= 2 && buf_[pos_] == '\r' && buf_[pos_ + 1] == '\n') pos_ += 2;
    auto end = buf_.find("\r\n\r\n", pos_);
    if (end == std::string::npos) {
      if (buf_.size() - pos_ > max_header_bytes_)
        return fail(431, "the request head exceeds " + std::to_string(max_header_bytes_) + " bytes");
      return status::need_more;
    }
    if (end - pos_ > max_header_bytes_)
      return fail(431, "the request head exceeds " + std::to_string(max_header_bytes_) + " bytes");
    if (parse_head(end) == status::error) return status::error;
  }
  if (buf_.size() - pos_ < body_bytes_) {
    if (!continue_answered_) {
      continue_answered_ = true;
      return status::send_continue;
    }
    return status::need_more;
  }
  out = std::move(head_);
  out.body.assign(buf_, pos_, body_bytes_);
  pos_ += body_bytes_;
  have_head_ = false;
  return status::request;
}

std::string ascii_lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string_view http_status_line(int status) noexcept {
  switch (status) {
    case 100: return "100 Continue";
    case 200: return "200 OK";
    case 400: return "400 Bad Request";
    case 401: return "401 Unauthorized";
    case 403: return "403 Forbidden";
    case 404: return "404 Not Found";
    case 405: return "405 Method Not Allowed";
    case 408: return "408 Request Timeout";
    case 409: return "409 Conflict";
    case 413: return "413 Content Too Large";
    case 415: return "415 Unsupported Media Type";
    case 429: return "429 Too Many Requests";
    case 431: return "431 Request Header Fields Too Large";
    case 501: return "501 Not Implemented";
    case 503: return "503 Service Unavailable";
    case 505: return "505 HTTP Version Not Supported";
    default: return "500 Internal Server Error";
  }
}

namespace {
std::string head(int status, std::string_view content_type, bool keep_alive) {
  std::string r = "HTTP/1.1 ";
  r += http_status_line(status);
  r += "\r\nContent-Type: ";
  r += content_type;
  r += keep_alive ? "\r\nConnection: keep-alive" : "\r\nConnection: close";
  return r;
}
}  // namespace

std::string http_response(int status, std::string_view content_type, std::string_view body, bool keep_alive,
                          std::string_view extra_headers) {
  std::string r = head(status, content_type, keep_alive);
  r += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  r += extra_headers;
  r += "\r\n";
  r += body;
  return r;
}

std::string http_stream_head(int status, std::string_view content_type, bool keep_alive, std::string_view extra_headers) {
  std::string r = head(status, content_type, keep_alive) + "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
  r += extra_headers;
  r += "\r\n";
  return r;
}

void append_http_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;  // an empty chunk would end the stream
  char hex[17];
  auto [p, ec] = std::to_chars(hex, hex + sizeof hex, data.size(), 16);
  out.append(hex, p);
  out += "\r\n";
  out += data;
  out += "\r\n";
}

void append_http_last_chunk(std::string& out) { out += "0\r\n\r\n"; }

}  // namespace troupe::wire
