// libFuzzer harness for what a checkpoint directory feeds the loader before any weight is used:
// the first byte picks a safetensors file (its bytes written to a scratch file and opened, as the
// loader maps one), a config.json, a generation_config.json or config.json's quantization_config
// (GPTQ, AWQ, FP8, Troupe INT8); the rest is the content. Each must
// load or be refused with troupe::error, never crash, overrun or hang. Of a file that opens, every
// F32 / BF16 / F16 tensor is widened (touching all its bytes under ASan). Not part of ctest:
// tools/fuzz.sh checkpoint.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/core/error.hpp"
#include "runtime/model/config.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/quant/quant_config.hpp"

namespace {

// One scratch file per process, rewritten for each input.
const std::string& scratch_path() {
  static const std::string p = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/troupe-fuzz-" + std::to_string(getpid()) + ".safetensors";
  }();
  return p;
}

void open_safetensors(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(scratch_path().c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  troupe::safetensors_file st(scratch_path());
  for (const auto& t : st.tensors()) {
    if (t.type != troupe::dtype::f32 && t.type != troupe::dtype::bf16 && t.type != troupe::dtype::f16) continue;
    const auto v = troupe::widen_to_f32(t);
    if (v.size() != static_cast<size_t>(t.numel())) std::abort();  // the header's shape is the data's
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 4) {
      case 0: open_safetensors(data + 1, size - 1); break;
      case 1: troupe::parse_model_config(text, "config.json"); break;
      case 2: troupe::parse_generation_config(text, "generation_config.json"); break;
      default: troupe::quant::parse_quant_config(text, "config.json"); break;
    }
  } catch (const troupe::error&) {
    // refused with a message: what bad input must get
  }
  return 0;
}
