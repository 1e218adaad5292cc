// Framing of the client protocol: every frame is a 4-byte big-endian payload length followed by
// that many bytes (one msgpack map). frame_decoder cuts a byte stream into payloads and refuses a
// declared length above the limit before buffering any of it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::wire {

inline constexpr size_t frame_header_bytes = 4;

// Appends the 4-byte big-endian length of `payload_bytes`.
void append_frame_header(std::string& out, uint32_t payload_bytes);
// Appends header + payload.
void append_frame(std::string& out, std::string_view payload);

class frame_decoder {
 public:
  enum class status : uint8_t {
    frame,      // `payload` holds the next frame's bytes (possibly empty)
    need_more,  // no complete frame buffered
    too_large,  // the next frame declares more than max_frame_bytes; the stream cannot resync
  };

  explicit frame_decoder(uint32_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  void feed(std::string_view bytes);
  status next(std::string& payload);

  uint32_t max_frame_bytes() const noexcept { return max_frame_bytes_; }
  // The length the offending header declared (after next() returned too_large).
  uint32_t declared_bytes() const noexcept { return declared_bytes_; }
  // Bytes received and not yet returned as frames (bounded by header + max_frame_bytes + a read).
  size_t buffered_bytes() const noexcept { return buf_.size() - pos_; }

 private:
  uint32_t max_frame_bytes_;
  uint32_t declared_bytes_ = 0;
  bool broken_ = false;
  std::string buf_;
  size_t pos_ = 0;  // consumed prefix of buf_, dropped lazily to keep feed() amortised O(n)
};

}  // namespace troupe::wire
