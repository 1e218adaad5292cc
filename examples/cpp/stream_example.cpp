// The C++ client library in a dozen lines: stream one completion from a running `troupe serve`.
//   troupe_stream_example PORT 1,2,3      (prompt ids; text works with a tokenizer-backed model)
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "examples/cpp/troupe_client.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PORT PROMPT_TEXT | PORT --ids 1,2,3\n", argv[0]);
    return 2;
  }
  troupe::client::client c("127.0.0.1", static_cast<uint16_t>(std::atoi(argv[1])));
  troupe::wire::generate_request r;
  if (std::string(argv[2]) == "--ids" && argc > 3) {
    r.kind = troupe::wire::prompt_kind::ids;
    std::stringstream ss(argv[3]);
    for (std::string x; std::getline(ss, x, ',');) r.prompt_ids.push_back(std::stoi(x));
  } else {
    r.prompt = argv[2];
  }
  r.max_tokens = 16;
  auto s = c.generate(r);
  while (auto t = s.next()) std::printf("%s%s", t->text.c_str(), t->text.empty() ? "." : "");
  std::printf("\n[%s after %lld tokens]\n", std::string(troupe::wire::to_string(s.done().reason)).c_str(),
              static_cast<long long>(s.done().usage.completion_tokens));
}
