// libFuzzer harness for a checkpoint's tokenizer.json (its own fast JSON scanner reads the vocab
// and merges): every file must load or be refused with troupe::error, never crash, overrun or
// hang; a tokenizer that loads must encode and decode a fixed text (with an added token and bytes
// that are not UTF-8 in between) or refuse it with troupe::error. The file is written to a scratch
// directory, as the loader reads a directory. Not part of ctest: tools/fuzz.sh tokenizer_json.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace {

const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path d = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path p = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("troupe-fuzz-tok-" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (scratch_dir() / "tokenizer.json").string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const troupe::tokenizer tok(scratch_dir().string());
    const auto ids = tok.encode("ab abc <|end|> \xc3\xa9t\xc3\xa9 12 ab");
    tok.decode(ids);
    troupe::stream_decoder s(tok);
    for (int32_t id : ids) s.push(id);
    s.finish();
    tok.encode("\xff");  // not UTF-8: an error
  } catch (const troupe::error&) {
    // refused with a message
  }
  return 0;
}
