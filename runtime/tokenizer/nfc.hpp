// NFC normalisation (the Qwen3 tokenizer.json `normalizer`), fast when text is already NFC:
// a quick check (UAX #15) skips it, and only the stretch between two safe boundaries around
// each offending character goes through utf8proc.
#pragma once

#include <string>
#include <string_view>

namespace troupe::tok {

// `text` must be valid UTF-8. Returns `text` itself when it is already in NFC, else the NFC
// form, stored in `storage`.
std::string_view nfc_normalize(std::string_view text, std::string& storage);

// Reference: the whole text through utf8proc (tests compare the two).
std::string nfc_reference(std::string_view text);

}  // namespace troupe::tok
