// `troupe tokenize`, `detokenize` and `chat-template` end to end: every reference case through
// the binary as JSON lines, and bad lines exiting 1 with the line number in one message.
#define BOOST_TEST_MODULE tokenizer_cli
#include <boost/test/unit_test.hpp>

#include <array>
#include <cstdio>
#include <sstream>
#include <sys/wait.h>

#include "runtime/tokenizer/nfc.hpp"
#include "tests/runtime/tokenizer/test_util.hpp"

using ojson = nlohmann::ordered_json;
using troupe::test::temp_dir;

namespace {

struct result {
  int rc = -1;
  std::string output;  // stdout, then stderr
};

result troupe_cli(const std::string& args, const std::string& input) {
  temp_dir d;
  d.write("stdin.jsonl", input);
  std::string cmd = std::string(TROUPE_BIN) + " " + args + " < " + (d.path / "stdin.jsonl").string() + " 2>&1";
  result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p);
  std::array<char, 65536> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

const std::string model = "--model " + troupe::test::qwen_dir();

}  // namespace

BOOST_AUTO_TEST_CASE(tokenize_and_detokenize_every_reference_case) {
  const auto& cases = troupe::test::tokenizer_cases();
  std::string texts, id_lines;
  for (const auto& c : cases) {
    texts += c["text"].dump() + "\n";
    id_lines += ojson{{"ids", c["ids"]}}.dump() + "\n";
  }
  result enc = troupe_cli("tokenize " + model, texts);
  BOOST_TEST(enc.rc == 0);
  auto out = lines(enc.output);
  BOOST_REQUIRE(out.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) BOOST_TEST(ojson::parse(out[i])["ids"] == cases[i]["ids"]);
  BOOST_TEST(out[0].rfind("{\"ids\": [", 0) == 0u);

  result dec = troupe_cli("detokenize " + model, id_lines);
  BOOST_TEST(dec.rc == 0);
  out = lines(dec.output);
  BOOST_REQUIRE(out.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    BOOST_TEST(ojson::parse(out[i]).get<std::string>() == troupe::tok::nfc_reference(cases[i]["text"].get<std::string>()));
}

BOOST_AUTO_TEST_CASE(detokenize_options) {
  result r = troupe_cli("detokenize --skip-special-tokens " + model, "[151644, 9707, 151645]\n{\"ids\": [9707]}\n");
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(r.output == "\"Hello\"\n\"Hello\"\n");
}

BOOST_AUTO_TEST_CASE(chat_template_every_reference_case) {
  auto cases = troupe::test::read_jsonl(std::string(TROUPE_TEST_DATA_DIR) + "/chat_template/cases.jsonl");
  std::string input;
  for (const auto& c : cases) {
    ojson req = {{"messages", c["messages"]}};
    for (const char* k : {"tools", "add_generation_prompt", "enable_thinking"})
      if (c.contains(k)) req[k] = c[k];
    input += req.dump() + "\n";
  }
  result r = troupe_cli("chat-template " + model, input);
  BOOST_TEST(r.rc == 0);
  auto out = lines(r.output);
  BOOST_REQUIRE(out.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    ojson got = ojson::parse(out[i]);
    BOOST_TEST(got["text"] == cases[i]["text"], cases[i]["name"]);
    BOOST_TEST(got["ids"] == cases[i]["ids"], cases[i]["name"]);
  }
}

BOOST_AUTO_TEST_CASE(bad_lines_exit_1_naming_the_line) {
  result r = troupe_cli("tokenize " + model, "\"ok\"\n42\n");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.output == "{\"ids\": [562]}\ntroupe tokenize: error: stdin line 2: expected a JSON string, got number\n");
  r = troupe_cli("tokenize " + model, "\"unterminated\n");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.output.find("stdin line 1: [json.exception.parse_error") != std::string::npos, r.output);
  r = troupe_cli("detokenize " + model, "[1, 999999]\n");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.output.find("stdin line 1: token id 999999 is not in the vocabulary") != std::string::npos, r.output);
  r = troupe_cli("chat-template " + model, "{\"messages\": [], \"tool\": []}\n");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.output.find("unknown key \"tool\"") != std::string::npos, r.output);
  temp_dir empty;
  r = troupe_cli("tokenize --model " + empty.str(), "\"x\"\n");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(r.output.find("no tokenizer.json in " + empty.str()) != std::string::npos, r.output);
}
