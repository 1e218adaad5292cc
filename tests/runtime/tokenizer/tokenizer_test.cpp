// troupe::tokenizer against the Qwen3 reference ids (every case of tests/data/tokenizer), its
// decoding, its errors and its special-token accessors.
#define BOOST_TEST_MODULE troupe_tokenizer
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/nfc.hpp"
#include "tests/runtime/tokenizer/test_util.hpp"

using troupe::errc;
using troupe::test::qwen;
using troupe::test::tokenizer_cases;

using troupe::test::expect_error;

BOOST_AUTO_TEST_SUITE(tokenizer)

BOOST_AUTO_TEST_CASE(every_reference_case_gives_the_reference_ids) {
  const auto& cases = tokenizer_cases();
  BOOST_TEST(cases.size() == 275u);
  size_t matched = 0;
  for (const auto& c : cases) {
    auto ids = qwen().encode(c["text"].get<std::string>());
    auto ref = c["ids"].get<std::vector<int32_t>>();
    if (ids == ref) {
      ++matched;
    } else {
      BOOST_ERROR("category " << c["category"] << " text " << c["text"].dump());
    }
  }
  BOOST_TEST(matched == cases.size());
}

BOOST_AUTO_TEST_CASE(decode_of_encode_is_the_nfc_text) {
  for (const auto& c : tokenizer_cases()) {
    std::string text = c["text"].get<std::string>();
    std::string nfc = troupe::tok::nfc_reference(text);
    BOOST_TEST(qwen().decode(qwen().encode(text)) == nfc, "text " << c["text"].dump());
    BOOST_TEST(qwen().decode(c["ids"].get<std::vector<int32_t>>()) == nfc);
  }
}

BOOST_AUTO_TEST_CASE(known_ids_and_no_bos_or_eos_added) {
  BOOST_TEST(qwen().encode("").empty());
  BOOST_TEST(qwen().encode("Hello world") == (std::vector<int32_t>{9707, 1879}));
  BOOST_TEST(qwen().encode("<|im_start|>user\nhi<|im_end|>") ==
             (std::vector<int32_t>{151644, 872, 198, 6023, 151645}));
  // Near-misses of added tokens are ordinary text.
  auto near = qwen().encode("<|im_start|");
  BOOST_TEST((std::find(near.begin(), near.end(), 151644) == near.end()));
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_refused_naming_the_byte_offset) {
  expect_error([] { (void)qwen().encode(std::string("abc\xFF" "def")); }, errc::invalid_input,
               "bad byte 0xFF at byte offset 3");
  expect_error([] { (void)qwen().encode(std::string("ok \xC3")); }, errc::invalid_input, "at byte offset 3");
  expect_error([] { (void)qwen().encode(std::string("\xED\xA0\x80")); }, errc::invalid_input, "at byte offset 0");
  // Invalid bytes inside what looks like an added token are still found.
  expect_error([] { (void)qwen().encode(std::string("<|im_start|>\xC0\xAF")); }, errc::invalid_input,
               "at byte offset 12");
}

BOOST_AUTO_TEST_CASE(decode_rejects_ids_outside_the_vocabulary) {
  expect_error([] { (void)qwen().decode(std::vector<int32_t>{9707, 151669}); }, errc::out_of_range,
               "token id 151669 is not in the vocabulary");
  expect_error([] { (void)qwen().decode(std::vector<int32_t>{-1}); }, errc::out_of_range, "token id -1");
  expect_error([] { (void)qwen().token_bytes(151935); }, errc::out_of_range, "151935");
  BOOST_TEST(!qwen().contains(151669));
  BOOST_TEST(qwen().contains(151668));
}

BOOST_AUTO_TEST_CASE(skip_special_tokens_drops_only_special_added_tokens) {
  std::vector<int32_t> ids = qwen().encode("<|im_start|>assistant\n<think>\nx\n</think>\n\nHi<|im_end|>");
  BOOST_TEST(qwen().decode(ids) == "<|im_start|>assistant\n<think>\nx\n</think>\n\nHi<|im_end|>");
  // <think> is an added token but not special: kept, as in Hugging Face.
  BOOST_TEST(qwen().decode(ids, true) == "assistant\n<think>\nx\n</think>\n\nHi");
  BOOST_TEST(qwen().is_special(151645));
  BOOST_TEST(!qwen().is_special(151667));
  BOOST_TEST(!qwen().is_special(9707));
}

BOOST_AUTO_TEST_CASE(decode_replaces_broken_utf8_like_hugging_face) {
  // " 🎉" is three tokens: " \xF0\x9F", "\x8E", "\x89"; a prefix decodes with U+FFFD.
  std::vector<int32_t> ids = qwen().encode(" \xF0\x9F\x8E\x89");
  BOOST_TEST(ids == (std::vector<int32_t>{11162, 236, 231}));
  BOOST_TEST(qwen().decode(std::vector<int32_t>{11162, 236}) == " \xEF\xBF\xBD");
  BOOST_TEST(qwen().decode(std::vector<int32_t>{236, 9707}) == "\xEF\xBF\xBDHello");
}

BOOST_AUTO_TEST_CASE(special_token_accessors) {
  BOOST_TEST(qwen().eos_token_id().value() == 151645);   // <|im_end|>
  BOOST_TEST(qwen().pad_token_id().value() == 151643);   // <|endoftext|>
  BOOST_TEST(qwen().endoftext_token_id().value() == 151643);
  BOOST_TEST(!qwen().bos_token_id().has_value());
  BOOST_TEST(qwen().token_to_id("<think>").value() == 151667);
  BOOST_TEST(qwen().token_to_id("Hello").value() == 9707);
  BOOST_TEST(qwen().token_to_id(" world").value() == 1879);
  BOOST_TEST(!qwen().token_to_id("no such token at all").has_value());
  BOOST_TEST(qwen().id_limit() == 151669u);
  BOOST_TEST(qwen().num_merges() == 151387u);
}

BOOST_AUTO_TEST_CASE(pathological_inputs_encode_and_round_trip) {
  // One huge pre-token of each kind (the heap BPE path); the bench shows their linear cost.
  for (std::string unit : {"a", " ", "\xE4\xB8\x80", "!", "\n"}) {
    std::string text;
    for (int i = 0; i < 20000; ++i) text += unit;
    auto ids = qwen().encode(text);
    BOOST_TEST(!ids.empty());
    BOOST_TEST(qwen().decode(ids) == text);
  }
}

BOOST_AUTO_TEST_CASE(missing_model_directory_is_an_io_error) {
  expect_error([] { troupe::tokenizer t("/nonexistent/model"); }, errc::io_error, "no tokenizer.json in /nonexistent/model");
}

BOOST_AUTO_TEST_SUITE_END()
