// GPT-2's bytes_to_unicode() table (see byte_level.hpp), computed rather than listed.
#include "runtime/tokenizer/byte_level.hpp"

#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

byte_level::byte_level() {
  char_to_byte_.fill(-1);
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    char32_t c = printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
    byte_to_char_[static_cast<size_t>(b)] = c;
    char_to_byte_[c] = static_cast<int16_t>(b);
  }
}

const byte_level& byte_level::get() {
  static const byte_level table;
  return table;
}

std::optional<std::string> byte_level::decode(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    i += static_cast<size_t>(decode_utf8(p + i, cp));
    int b = char_to_byte(cp);
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

std::string byte_level::encode(std::string_view bytes) const {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, byte_to_char_[b]);
  return out;
}

}  // namespace troupe::tok
