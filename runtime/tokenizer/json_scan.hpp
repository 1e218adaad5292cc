// A minimal pull scanner over JSON text, for the two big sections of tokenizer.json (vocab and
// merges) that nlohmann::json parses too slowly for the load-time target (~0.4 s for the 11 MB
// Qwen3 file). Everything else is sliced out with skip_value() and handed to nlohmann::json.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::tok {

class json_scanner {
 public:
  // `what` names the source in error messages (a file path).
  json_scanner(std::string_view text, std::string what) : text_(text), what_(std::move(what)) {}

  char peek();  // next non-space character, '\0' at the end
  void expect(char c);
  bool at_end();

  // Objects: begin_object(), then next_member(key) until it returns false.
  void begin_object() { expect('{'); first_ = true; }
  bool next_member(std::string_view& key, std::string& scratch);
  // Arrays: begin_array(), then next_element() until it returns false.
  void begin_array() { expect('['); first_ = true; }
  bool next_element();

  // A string value; views the input when it has no escapes, else decodes into `scratch`.
  std::string_view read_string(std::string& scratch);
  int64_t read_int();
  // Skips one value of any kind and returns its text.
  std::string_view skip_value();

  size_t offset() const { return pos_; }
  [[noreturn]] void fail(const std::string& expected) const;

 private:
  void skip_ws();
  void skip_string();
  bool close_or_comma(char close);

  std::string_view text_;
  std::string what_;
  size_t pos_ = 0;
  bool first_ = true;
};

}  // namespace troupe::tok
