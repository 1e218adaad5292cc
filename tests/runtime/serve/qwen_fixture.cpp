#include "tests/runtime/serve/qwen_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include <memory>

#include "runtime/serve/chat_renderer.hpp"
#include "runtime/wire/event_codec.hpp"
#include "runtime/wire/frame.hpp"

namespace troupe::serve::test {

const model_facts& qwen_facts() {
  static const tokenizer tok(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer");
  static const model_facts m = [] {
    model_facts f;
    f.name = "qwen3";
    f.vocab_size = 151936;
    f.max_model_len = 40960;
    f.tok = &tok;
    f.grammars = std::make_shared<grammar::automaton_cache>(grammar::token_table::from_tokenizer(tok));
    f.chat = make_chat_renderer(std::make_shared<const chat_template>(
        chat_template::from_directory(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer")));
    return f;
  }();
  return m;
}

std::vector<wire::event> events_of(const std::string& bytes) {
  wire::frame_decoder dec(1 << 20);
  dec.feed(bytes);
  std::vector<wire::event> out;
  std::string payload;
  while (dec.next(payload) == wire::frame_decoder::status::frame) {
    auto d = wire::decode_event(payload);
    BOOST_REQUIRE_MESSAGE(d.ok(), d.error);
    out.push_back(*d.ev);
  }
  return out;
}

}  // namespace troupe::serve::test
