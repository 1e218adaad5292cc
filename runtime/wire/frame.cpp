#include "runtime/wire/frame.hpp"

namespace troupe::wire {

void append_frame_header(std::string& out, uint32_t n) {
  const char header[frame_header_bytes] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                                           static_cast<char>(n >> 8), static_cast<char>(n)};
  out.append(header, frame_header_bytes);
}

void append_frame(std::string& out, std::string_view payload) {
  append_frame_header(out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
}

void frame_decoder::feed(std::string_view bytes) {
  if (broken_) return;  // after too_large nothing that follows can be trusted
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

frame_decoder::status frame_decoder::next(std::string& payload) {
  if (broken_) return status::too_large;
  if (buf_.size() - pos_ < frame_header_bytes) return status::need_more;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (n > max_frame_bytes_) {
    declared_bytes_ = n;
    broken_ = true;
    buf_.clear();
    pos_ = 0;
    return status::too_large;
  }
  if (buf_.size() - pos_ - frame_header_bytes < n) return status::need_more;
  payload.assign(buf_, pos_ + frame_header_bytes, n);
  pos_ += frame_header_bytes + n;
  return status::frame;
}

}  // namespace troupe::wire
