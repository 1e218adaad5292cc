// The ByteLevel alphabet of GPT-2 style tokenizers: each byte 0..255 is written as one printable
// code point (printable Latin-1 bytes as themselves, the other 68 as U+0100..U+0143). Vocabulary
// strings in tokenizer.json use this alphabet; Troupe stores and merges raw bytes instead.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::tok {

class byte_level {
 public:
  static const byte_level& get();

  char32_t byte_to_char(uint8_t b) const noexcept { return byte_to_char_[b]; }
  // -1 when cp is not in the alphabet.
  int char_to_byte(char32_t cp) const noexcept {
    return cp < char_to_byte_.size() ? char_to_byte_[cp] : -1;
  }

  // Alphabet string (valid UTF-8) -> raw bytes; nullopt if a character is not in the alphabet.
  std::optional<std::string> decode(std::string_view text) const;
  // Raw bytes -> alphabet string.
  std::string encode(std::string_view bytes) const;

 private:
  byte_level();
  std::array<char32_t, 256> byte_to_char_{};
  std::array<int16_t, 0x144> char_to_byte_{};
};

}  // namespace troupe::tok
