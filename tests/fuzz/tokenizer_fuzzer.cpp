// libFuzzer harness for the Qwen3 tokenizer on request text (models/qwen3-tokenizer): text that
// is not UTF-8 must be refused with troupe::error; for UTF-8 text, decode(encode(text)) must be
// its NFC form (tokenizer.json's normalizer; added tokens written in the text come back as
// written), and the streaming detokeniser fed the ids one at a time must give decode()'s text.
// Not part of ctest: tools/fuzz.sh tokenizer.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/nfc.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace {

const troupe::tokenizer& qwen3() {
  static const troupe::tokenizer t("models/qwen3-tokenizer");  // the script runs from the repo root
  return t;
}

[[noreturn]] void fail(const char* what, const std::string& text) {
  std::fprintf(stderr, "%s for %zu bytes of text\n", what, text.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const troupe::tokenizer& tok = qwen3();
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text);
  } catch (const troupe::error&) {
    return 0;  // not UTF-8: refused with a message
  }
  std::string storage;
  const std::string want(troupe::tok::nfc_normalize(text, storage));
  const std::string got = tok.decode(ids);
  if (got != want) fail("decode(encode(text)) != NFC(text)", text);
  troupe::stream_decoder stream(tok);
  std::string streamed;
  for (int32_t id : ids) stream.push(id, streamed);
  streamed += stream.finish();
  if (streamed != got) fail("the streamed text != decode()", text);
  return 0;
}
