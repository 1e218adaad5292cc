// The tokenizer.json reader on small hand-made files: both merge formats, the PCRE2 path for a
// GPT-2 style pre-tokenizer, and each malformed or unsupported file refused with its error.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "runtime/tokenizer/byte_level.hpp"
#include "runtime/tokenizer/pretokenizer.hpp"
#include "tests/runtime/tokenizer/test_util.hpp"

using troupe::errc;
using troupe::test::expect_error;
using troupe::test::temp_dir;
using ojson = nlohmann::ordered_json;

namespace {

// Bytes as ids 0..255, then "ab" = 256 and "Ġab" = 257; one added token.
ojson tiny_tokenizer(bool old_merges = false) {
  const auto& bl = troupe::tok::byte_level::get();
  ojson vocab = ojson::object();
  for (int b = 0; b < 256; ++b) vocab[bl.encode(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["\xC4\xA0" "ab"] = 257;
  ojson merges = old_merges ? ojson::array({"a b", "\xC4\xA0 ab"})
                            : ojson::array({ojson::array({"a", "b"}), ojson::array({"\xC4\xA0", "ab"})});
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["added_tokens"] = ojson::array({{{"id", 258}, {"content", "<|end|>"}, {"single_word", false}, {"lstrip", false},
                                     {"rstrip", false}, {"normalized", false}, {"special", true}}});
  j["normalizer"] = {{"type", "NFC"}};
  ojson split = {{"type", "Split"},
                 {"pattern", {{"Regex", std::string(troupe::tok::qwen_pattern)}}},
                 {"behavior", "Isolated"},
                 {"invert", false}};
  ojson bytes = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", ojson::array({split, bytes})}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr},  {"unk_token", nullptr},
                {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
                {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}};
  return j;
}

std::string dir_with(const temp_dir& d, const ojson& j) {
  d.write("tokenizer.json", j.dump(2));
  return d.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_json)

BOOST_AUTO_TEST_CASE(tiny_tokenizer_in_both_merge_formats) {
  for (bool old_merges : {false, true}) {
    temp_dir d;
    troupe::tokenizer tok(dir_with(d, tiny_tokenizer(old_merges)));
    BOOST_TEST(tok.encode("ab ab<|end|>b") == (std::vector<int32_t>{256, 257, 258, 'b'}));
    BOOST_TEST(tok.decode(std::vector<int32_t>{256, 257, 258}) == "ab ab<|end|>");
    BOOST_TEST(tok.decode(std::vector<int32_t>{256, 258}, true) == "ab");
    BOOST_TEST(tok.num_merges() == 2u);
    BOOST_TEST(!tok.eos_token_id().has_value());  // no tokenizer_config.json
  }
}

BOOST_AUTO_TEST_CASE(gpt2_byte_level_pre_tokenizer_uses_pcre2) {
  temp_dir d;
  ojson j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  troupe::tokenizer tok(dir_with(d, j));
  BOOST_TEST(tok.encode("ab ab") == (std::vector<int32_t>{256, 257}));
  BOOST_TEST(tok.encode("ab12") == (std::vector<int32_t>{256, '1', '2'}));
}

BOOST_AUTO_TEST_CASE(tokenizer_config_names_special_tokens) {
  temp_dir d;
  d.write("tokenizer_config.json", R"({"eos_token": {"content": "<|end|>"}, "pad_token": "ab", "bos_token": null})");
  troupe::tokenizer tok(dir_with(d, tiny_tokenizer()));
  BOOST_TEST(tok.eos_token_id().value() == 258);
  BOOST_TEST(tok.pad_token_id().value() == 256);
  BOOST_TEST(!tok.bos_token_id().has_value());
  temp_dir bad;
  bad.write("tokenizer_config.json", R"({"eos_token": "<|missing|>"})");
  expect_error([&] { troupe::tokenizer t(dir_with(bad, tiny_tokenizer())); }, errc::invalid_checkpoint,
               "eos_token \"<|missing|>\" is not a token");
}

BOOST_AUTO_TEST_CASE(unsupported_configurations_are_refused) {
  struct variant {
    const char* what;
    void (*edit)(ojson&);
    const char* needle;
  };
  const variant variants[] = {
      {"NFKC", [](ojson& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer is {\"type\":\"NFKC\"}"},
      {"dropout", [](ojson& j) { j["model"]["dropout"] = 0.1; }, "model.dropout"},
      {"WordPiece", [](ojson& j) { j["model"]["type"] = "WordPiece"; }, "model.type"},
      {"lstrip", [](ojson& j) { j["added_tokens"][0]["lstrip"] = true; }, "added_tokens[0].lstrip"},
      {"prefix space",
       [](ojson& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; },
       "add_prefix_space"},
      {"Merged behaviour", [](ojson& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
       "Split behavior"},
      {"byte fallback", [](ojson& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback"},
      {"no byte token", [](ojson& j) { j["model"]["vocab"].erase("z"); }, "no vocabulary token for byte 122"},
  };
  for (const auto& v : variants) {
    BOOST_TEST_CONTEXT(v.what) {
      temp_dir d;
      ojson j = tiny_tokenizer();
      v.edit(j);
      expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::unsupported, v.needle);
    }
  }
}

BOOST_AUTO_TEST_CASE(malformed_files_name_the_problem) {
  {
    temp_dir d;
    std::string text = tiny_tokenizer().dump(2);
    d.write("tokenizer.json", text.substr(0, text.size() / 2));  // cut inside the vocabulary
    expect_error([&] { troupe::tokenizer t(d.str()); }, errc::invalid_checkpoint, "tokenizer.json: at byte");
  }
  {
    temp_dir d;
    ojson j = tiny_tokenizer();
    j.erase("model");
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::invalid_checkpoint, "no \"model\" section");
  }
  {
    temp_dir d;
    ojson j = tiny_tokenizer();
    j["model"]["merges"].push_back(ojson::array({"x", "yz"}));
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::invalid_checkpoint,
                 "model.merges[2] has a part that is not in the vocabulary");
  }
  {
    temp_dir d;
    ojson j = tiny_tokenizer();
    j["model"]["vocab"]["q!"] = "seven";
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::invalid_checkpoint, "expected an integer");
  }
  {
    temp_dir d;
    ojson j = tiny_tokenizer();
    j["model"]["vocab"]["zz"] = 97;  // the id of "a" again
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::invalid_checkpoint, "token id 97 appears twice");
  }
  {
    temp_dir d;
    d.write("tokenizer.json", "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": []}} trailing");
    expect_error([&] { troupe::tokenizer t(d.str()); }, errc::invalid_checkpoint, "the end of the file");
  }
  // Fields of the wrong JSON type (tools/fuzz.sh tokenizer_json found the first escaping as
  // nlohmann's type_error): this file's error, naming the section.
  struct wrong_type {
    const char* section;
    ojson value;
  };
  for (const auto& w : {wrong_type{"decoder", "ByteLevel"},
                        wrong_type{"decoder", {{"type", "ByteLevel"}, {"use_regex", "yes"}}},
                        wrong_type{"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", 0.5}}},
                        wrong_type{"normalizer", {{"type", 7}}}}) {
    temp_dir d;
    ojson j = tiny_tokenizer();
    j[w.section] = w.value;
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::invalid_checkpoint,
                 std::string("tokenizer.json: ") + w.section + ": [json.exception.type_error");
  }
  {  // a Split without "behavior": named as missing (null), never read past the object
    temp_dir d;
    ojson j = tiny_tokenizer();
    j["pre_tokenizer"]["pretokenizers"][0].erase("behavior");
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::unsupported, "pre_tokenizer Split behavior is null");
  }
  for (int64_t id : {int64_t{-1}, int64_t{1} << 32}) {  // 2^32 would have wrapped to id 0
    temp_dir d;
    ojson j = tiny_tokenizer();
    j["added_tokens"][0]["id"] = id;
    expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, errc::invalid_checkpoint,
                 "added_tokens[0] has id " + std::to_string(id) + "; expected one in [0, 2147483647]");
  }
}

// Post-processors against Hugging Face `tokenizers` (tests/data/tokenizer/post_processor_cases.json,
// tools/reference/embedding_template_cases.py): the Qwen3 tokenizer under Qwen3-Embedding's
// TemplateProcessing, under a Sequence adding tokens on both sides, and under plain ByteLevel;
// encode_with_special_tokens() gives add_special_tokens=True's ids, encode() the text's alone.
BOOST_AUTO_TEST_CASE(post_processor_templates_match_hugging_face) {
  std::ifstream in(std::string(TROUPE_TEST_DATA_DIR) + "/tokenizer/post_processor_cases.json");
  const auto ref = nlohmann::json::parse(in);
  std::ifstream qwen_in(troupe::test::qwen_dir() + "/tokenizer.json");
  ojson qwen = ojson::parse(qwen_in);
  for (const auto& [name, set] : ref.at("post_processors").items()) {
    BOOST_TEST_CONTEXT(name) {
      temp_dir d;
      qwen["post_processor"] = ojson::parse(set.at("post_processor").dump());
      const troupe::tokenizer t(dir_with(d, qwen));
      for (const auto& c : set.at("cases")) {
        const auto text = c.at("text").get<std::string>();
        BOOST_TEST(t.encode_with_special_tokens(text) == c.at("ids").get<std::vector<int32_t>>(),
                   boost::test_tools::per_element());
        BOOST_TEST(t.encode(text) == c.at("plain").get<std::vector<int32_t>>(), boost::test_tools::per_element());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_post_processors_name_the_problem) {
  const ojson eot_piece = {{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}};
  const ojson text_piece = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  auto templ = [&](ojson single, ojson specials) {
    return ojson{{"type", "TemplateProcessing"}, {"single", std::move(single)}, {"special_tokens", std::move(specials)}};
  };
  const ojson listed = {{"<|end|>", {{"id", "<|end|>"}, {"ids", {258}}, {"tokens", {"<|end|>"}}}}};
  {  // the tiny tokenizer with the template: "ab" then <|end|>
    temp_dir d;
    ojson j = tiny_tokenizer();
    j["post_processor"] = templ({text_piece, eot_piece}, listed);
    const troupe::tokenizer t(dir_with(d, j));
    BOOST_TEST(t.encode_with_special_tokens("ab") == (std::vector<int32_t>{256, 258}), boost::test_tools::per_element());
  }
  struct variant {
    const char* what;
    ojson post;
    errc code;
    const char* needle;
  };
  const variant variants[] = {
      {"unlisted token", templ({text_piece, eot_piece}, ojson::object()), errc::invalid_checkpoint,
       "post_processor.single names special token '<|end|>', which special_tokens does not list with its ids"},
      {"id outside the vocabulary",
       templ({text_piece, eot_piece}, {{"<|end|>", {{"id", "<|end|>"}, {"ids", {9999}}}}}), errc::invalid_checkpoint,
       "post_processor adds token id 9999, which is neither in the vocabulary nor an added token"},
      {"no text", templ({eot_piece}, listed), errc::unsupported, "a template with the sequence \"A\" in it"},
      {"sequence B", templ({{{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}, listed), errc::unsupported,
       "one sequence \"A\" between special tokens"},
      {"no single", ojson{{"type", "TemplateProcessing"}}, errc::invalid_checkpoint, "post_processor.single is missing"},
      {"BertProcessing", ojson{{"type", "BertProcessing"}}, errc::unsupported,
       "null, ByteLevel, TemplateProcessing or a Sequence of them"},
      {"in a Sequence", ojson{{"type", "Sequence"}, {"processors", {ojson{{"type", "RobertaProcessing"}}}}},
       errc::unsupported, "post_processor.processors[0] is"},
  };
  for (const auto& v : variants) {
    BOOST_TEST_CONTEXT(v.what) {
      temp_dir d;
      ojson j = tiny_tokenizer();
      j["post_processor"] = v.post;
      expect_error([&] { troupe::tokenizer t(dir_with(d, j)); }, v.code, v.needle);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
