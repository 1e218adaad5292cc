// libFuzzer harness for the server's request decoder: any bytes a client sends must give a
// request or a wire error, never a crash, a hang or unbounded memory; a decoded request must
// encode and decode to itself. Not part of ctest (it runs until stopped): tools/fuzz.sh request.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/wire/request_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace troupe::wire;
  const auto d = decode_request(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!d.ok()) return 0;
  const auto again = decode_request(encode_request(*d.req));
  if (!again.ok() || !(*again.req == *d.req)) std::abort();
  return 0;
}
