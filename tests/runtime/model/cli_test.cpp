// The troupe binary end to end: make-checkpoint writes a loadable model and refuses what it must;
// a bad checkpoint makes `troupe generate` exit non-zero with one message naming file and tensor.
#define BOOST_TEST_MODULE model_cli
#include <boost/test/unit_test.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "runtime/model/safetensors.hpp"
#include "tests/runtime/model/test_util.hpp"

namespace fs = std::filesystem;
using troupe::test::temp_dir;

namespace {

struct result {
  int rc = -1;
  std::string output;  // stdout and stderr
};

result troupe_cli(const std::string& args) {
  std::string cmd = std::string(TROUPE_BIN) + " " + args + " 2>&1";
  result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  BOOST_TEST_MESSAGE("$ troupe " << args << "\n" << r.output << "(exit " << r.rc << ")");
  return r;
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// The command fails (exit 1) and says `needle`.
void expect_cli_error(const std::string& args, const std::string& needle) {
  const result r = troupe_cli(args);
  BOOST_TEST(r.rc == 1, args);
  BOOST_TEST(contains(r.output, needle), r.output);
}

}  // namespace

BOOST_AUTO_TEST_CASE(make_checkpoint_writes_a_loadable_model) {
  temp_dir dir;
  const std::string out = dir.str("tiny");
  result r = troupe_cli("make-checkpoint --out " + out + " --preset tiny --seed 5");
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(contains(r.output, "loaded back"));
  BOOST_TEST(contains(r.output, "qwen3-v151936-h64-l2-a4x2x32-i160-bf16-"));
  BOOST_TEST(fs::exists(fs::path(out) / "tokenizer.json"));
  // Not over an existing checkpoint without --force; with it, yes.
  r = troupe_cli("make-checkpoint --out " + out + " --preset tiny");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(contains(r.output, "exists and is not empty"));
  r = troupe_cli("make-checkpoint --out " + out + " --preset qwen3-moe-tiny --dtype f16 --force");
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(contains(r.output, "qwen3_moe-v151936"));
  BOOST_TEST(contains(r.output, "-f16-"));
  // --num-layers keeps the preset's layer shape with fewer layers.
  r = troupe_cli("make-checkpoint --out " + out + " --preset tiny --num-layers 3 --force");
  BOOST_TEST(r.rc == 0);
  BOOST_TEST(contains(r.output, "qwen3-v151936-h64-l3-a4x2x32-i160-bf16-"));
}

BOOST_AUTO_TEST_CASE(make_checkpoint_rejects_bad_options) {
  temp_dir dir;
  result r = troupe_cli("make-checkpoint --out " + dir.str("x") + " --preset qwen3-72b");
  BOOST_TEST(r.rc != 0);
  BOOST_TEST(contains(r.output, "qwen3-72b"));
  r = troupe_cli("make-checkpoint --out " + dir.str("x") + " --preset tiny --dtype f8");
  BOOST_TEST(r.rc != 0);
  r = troupe_cli("make-checkpoint --out " + dir.str("x") + " --preset tiny --num-layers 0");
  BOOST_TEST(r.rc != 0);
  BOOST_TEST(contains(r.output, "--num-layers"));
  r = troupe_cli("make-checkpoint --out " + dir.str("x") + " --preset tiny --tokenizer " + dir.str("none"));
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(contains(r.output, "tokenizer.json"));
  BOOST_TEST(!fs::exists(dir.path() / "x"));
}

BOOST_AUTO_TEST_CASE(bad_checkpoint_is_one_clear_error) {
  temp_dir dir;
  const std::string out = dir.str("m");
  BOOST_REQUIRE(troupe_cli("make-checkpoint --out " + out + " --preset tiny --no-verify").rc == 0);
  const fs::path file = fs::path(out) / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) / 2);
  result r = troupe_cli("generate --model " + out + " --ids 1,2,3 --max-tokens 1");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(contains(r.output, file.string()));
  BOOST_TEST(contains(r.output, "truncated"));
  BOOST_TEST(contains(r.output, "tensor '"));
  fs::remove(fs::path(out) / "config.json");
  r = troupe_cli("generate --model " + out + " --ids 1 --max-tokens 1");
  BOOST_TEST(r.rc == 1);
  BOOST_TEST(contains(r.output, (fs::path(out) / "config.json").string()));
}

// --rope-scaling on the plain tiny-dense weights gives what transformers gives the same weights with
// that rope_scaling in config.json (the tiny-dense-yarn reference); null undoes a config's scaling.
BOOST_AUTO_TEST_CASE(rope_scaling_option_replaces_the_config) {
  const std::string ids = "--ids 3296,800,3022,3859,2331,3953,178,3296,3512,3568,528,2784,3892";
  const std::string yarn = R"('{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":64}')";
  const std::string greedy = " --max-tokens 6 --temperature 0 --json";
  result plain = troupe_cli("generate --model " + troupe::test::golden("tiny-dense") + " " + ids + greedy);
  result scaled = troupe_cli("generate --model " + troupe::test::golden("tiny-dense") + " " + ids + greedy +
                             " --rope-scaling " + yarn);
  result stored = troupe_cli("generate --model " + troupe::test::golden("tiny-dense-yarn") + " " + ids + greedy);
  result undone = troupe_cli("generate --model " + troupe::test::golden("tiny-dense-yarn") + " " + ids + greedy +
                             " --rope-scaling null");
  BOOST_TEST(plain.rc == 0);
  BOOST_TEST(scaled.rc == 0);
  BOOST_TEST(scaled.output == stored.output);
  BOOST_TEST(scaled.output != plain.output);
  BOOST_TEST(undone.output == plain.output);
  result bad = troupe_cli("generate --model " + troupe::test::golden("tiny-dense") + " " + ids +
                          R"( --rope-scaling '{"rope_type":"yarn","factor":4,"beta_fats":2}')");
  BOOST_TEST(bad.rc == 1);
  BOOST_TEST(contains(bad.output, "--rope-scaling: field 'rope_scaling.beta_fats'"));
  // YaRN x4 over 64 pretraining positions: 256 in all.
  result too_long = troupe_cli("generate --model " + troupe::test::golden("tiny-dense-yarn") + " " + ids +
                               " --max-tokens 250");
  BOOST_TEST(too_long.rc == 1);
  BOOST_TEST(contains(too_long.output, "exceeds the model's context of 256 tokens"));
}

// --override-generation-config: max_new_tokens caps the output; the default sampling changes (a
// greedy override gives --temperature 0's ids); a bad field is one clear error naming it.
BOOST_AUTO_TEST_CASE(generation_config_options_change_the_defaults) {
  const std::string gen = "generate --model " + troupe::test::golden("tiny-dense") + " --ids 3296,800,3022 --json";
  const result capped = troupe_cli(gen + R"( --max-tokens 9 --temperature 0 --override-generation-config '{"max_new_tokens": 3}')");
  BOOST_TEST_REQUIRE(capped.rc == 0);
  BOOST_TEST(nlohmann::json::parse(capped.output)["ids"].size() == 3u);
  const result greedy = troupe_cli(gen + " --max-tokens 6 --temperature 0");
  const result greedy_default = troupe_cli(gen + R"( --max-tokens 6 --override-generation-config '{"do_sample": false}')");
  BOOST_TEST(greedy_default.rc == 0);
  BOOST_TEST(greedy_default.output == greedy.output);
  expect_cli_error(gen + R"( --override-generation-config '{"temprature": 0}')", "unknown field 'temprature'");
  expect_cli_error(gen + " --generation-config /nonexistent", "there is no /nonexistent/generation_config.json");
}

// --lora: the greedy ids PEFT gives the adapter (tiny-dense-lora's reference), also over two shards;
// a broken adapter is one clear error naming its file.
BOOST_AUTO_TEST_CASE(lora_option_applies_a_peft_adapter) {
  const auto ref = nlohmann::json::parse(troupe::test::read_file(troupe::test::golden("tiny-dense-lora") + "/reference.json"));
  const auto& c = ref.at("cases").at(0);
  std::string ids;
  for (const auto& id : c.at("prompt_ids")) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id.get<int>());
  }
  const std::string adapter = troupe::test::golden("tiny-dense-lora") + "/adapter";
  const std::string args = "generate --model " + troupe::test::golden("tiny-dense") + " --ids " + ids +
                           " --max-tokens 8 --temperature 0 --json";
  result with = troupe_cli(args + " --lora " + adapter);
  BOOST_TEST(with.rc == 0);
  BOOST_REQUIRE(contains(with.output, "\"ids\""));
  const auto got = nlohmann::json::parse(with.output).at("ids").get<std::vector<int>>();
  const auto want = c.at("greedy").at("ids").get<std::vector<int>>();
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_TEST(troupe_cli(args).output != with.output);
  // Over two shards, each with its share of the adapter: PEFT's ids again.
  result split = troupe_cli(args + " --lora " + adapter + " --tensor-parallel-size 2");
  BOOST_TEST_REQUIRE(split.rc == 0, split.output);
  BOOST_TEST(nlohmann::json::parse(split.output).at("ids").get<std::vector<int>>() == want, boost::test_tools::per_element());

  temp_dir dir;
  fs::create_directories(dir.path() / "a");
  fs::copy_file(adapter + "/adapter_model.safetensors", dir.path() / "a" / "adapter_model.safetensors");
  troupe::test::write_file(dir.path() / "a" / "adapter_config.json", R"({"peft_type": "LORA", "r": 8, "lora_alpha": 16, "use_dora": true})");
  result bad = troupe_cli(args + " --lora " + dir.str("a"));
  BOOST_TEST(bad.rc == 1);
  BOOST_TEST(contains(bad.output, "a/adapter_config.json: use_dora is true"));
}

// --threads: the same greedy ids on one thread as on every core, over shards too; a count the
// shards cannot share or a negative one is one clear error.
BOOST_AUTO_TEST_CASE(threads_option_changes_no_output) {
  const std::string args = "generate --model " + troupe::test::golden("tiny-dense") +
                           " --ids 1,2,3,4,5 --max-tokens 8 --temperature 0 --json";
  result all = troupe_cli(args);
  BOOST_TEST_REQUIRE(all.rc == 0, all.output);
  result one = troupe_cli(args + " --threads 1");
  BOOST_TEST(one.rc == 0);
  BOOST_TEST(one.output == all.output);
  expect_cli_error(args + " --threads -1", "--threads must be >= 0 (got -1");
  expect_cli_error(args + " --threads 1 --tensor-parallel-size 2", "threads (1) is fewer than tensor_parallel_size (2)");
  result split = troupe_cli(args + " --threads 2 --tensor-parallel-size 2");
  BOOST_TEST(split.rc == 0, split.output);
}

// `troupe embed`: OpenAI's embeddings list, one unit-length vector per input of the model's
// hidden_size (or --dimensions), the same as one input alone; bad input is one clear error.
BOOST_AUTO_TEST_CASE(embed_prints_one_unit_vector_per_input) {
  const std::string base = "embed --model " + troupe::test::golden("tiny-dense");
  result two = troupe_cli(base + " --ids 1,2,3 --ids 4,5");
  BOOST_TEST_REQUIRE(two.rc == 0, two.output);
  const auto j = nlohmann::json::parse(two.output);
  BOOST_TEST(j.at("object") == "list");
  BOOST_REQUIRE_EQUAL(j.at("data").size(), 2u);
  BOOST_TEST(j.at("usage").at("prompt_tokens") == 5);
  for (const auto& d : j.at("data")) {
    const auto e = d.at("embedding").get<std::vector<double>>();
    BOOST_TEST(e.size() == 64u);  // tiny-dense's hidden_size
    double norm = 0;
    for (double v : e) norm += v * v;
    BOOST_TEST(norm == 1.0, boost::test_tools::tolerance(1e-5));
  }
  result alone = troupe_cli(base + " --ids 4,5");
  BOOST_TEST_REQUIRE(alone.rc == 0, alone.output);
  BOOST_TEST(nlohmann::json::parse(alone.output).at("data").at(0).at("embedding") == j.at("data").at(1).at("embedding"));
  result cut = troupe_cli(base + " --ids 1,2,3 --dimensions 8");
  BOOST_TEST_REQUIRE(cut.rc == 0, cut.output);
  BOOST_TEST(nlohmann::json::parse(cut.output).at("data").at(0).at("embedding").size() == 8u);
  result raw = troupe_cli(base + " --ids 1,2,3 --no-normalize");
  BOOST_TEST_REQUIRE(raw.rc == 0, raw.output);
  BOOST_TEST(nlohmann::json::parse(raw.output).at("data").at(0).at("embedding") != j.at("data").at(0).at("embedding"));
  expect_cli_error(base + " --ids 1,2,3 --dimensions 65", "dimensions (65) exceeds the model's hidden_size (64)");
  expect_cli_error(base + " --ids 1,99999", "input 0: token id 99999 is outside the vocabulary");
  expect_cli_error(base, "give --prompt TEXT, --input-file FILE or --ids 1,2,3");
}

// A checkpoint laid out as Qwen3-Embedding is published: tensors without the "model." prefix, no
// lm_head, and a tokenizer whose TemplateProcessing appends <|endoftext|>. `troupe embed --prompt`
// then embeds the text's ids plus <|endoftext|> (151643), with the same weights as the prefixed
// checkpoint it was made from.
BOOST_AUTO_TEST_CASE(embed_reads_a_qwen3_embedding_layout) {
  const std::string src = troupe::test::golden("e2e-full-vocab");  // Qwen3's vocabulary, tied
  temp_dir dir;
  for (const char* f : {"config.json", "generation_config.json"}) fs::copy_file(fs::path(src) / f, dir.path() / f);
  {
    troupe::safetensors_file in(src + "/model.safetensors");
    std::vector<troupe::tensor_to_write> ts;
    for (const auto& t : in.tensors())
      ts.push_back({t.name.rfind("model.", 0) == 0 ? t.name.substr(6) : t.name, t.type, t.shape, t.data, {}});
    troupe::write_safetensors(dir.str("model.safetensors"), ts);
  }
  const std::string tok_dir = std::string(TROUPE_SOURCE_DIR) + "/models/qwen3-tokenizer";
  fs::copy_file(tok_dir + "/tokenizer_config.json", dir.path() / "tokenizer_config.json");
  auto tok = nlohmann::ordered_json::parse(troupe::test::read_file(tok_dir + "/tokenizer.json"));
  const auto cases = nlohmann::json::parse(
      troupe::test::read_file(std::string(TROUPE_TEST_DATA_DIR) + "/tokenizer/post_processor_cases.json"));
  tok["post_processor"] = nlohmann::ordered_json::parse(cases.at("post_processors").at("qwen3_embedding").at("post_processor").dump());
  troupe::test::write_file(dir.path() / "tokenizer.json", tok.dump());

  result text = troupe_cli("embed --model " + dir.str() + " --prompt 'hello world'");
  BOOST_TEST_REQUIRE(text.rc == 0, text.output);
  result ids = troupe_cli("embed --model " + src + " --ids 14990,1879,151643");  // hello world <|endoftext|>
  BOOST_TEST_REQUIRE(ids.rc == 0, ids.output);
  const auto a = nlohmann::json::parse(text.output), b = nlohmann::json::parse(ids.output);
  BOOST_TEST(a.at("usage").at("prompt_tokens") == 3);
  BOOST_TEST(a.at("data").at(0).at("embedding") == b.at("data").at(0).at("embedding"));
  result without = troupe_cli("embed --model " + src + " --ids 14990,1879");
  BOOST_TEST(nlohmann::json::parse(without.output).at("data").at(0).at("embedding") != a.at("data").at(0).at("embedding"));

  // --input-file: one text a line (CRLF and blank lines tolerated), the same as --prompt each.
  troupe::test::write_file(dir.path() / "texts.txt", "hello world\r\n\nhi\n");
  result file = troupe_cli("embed --model " + dir.str() + " --input-file " + dir.str("texts.txt"));
  result two = troupe_cli("embed --model " + dir.str() + " --prompt 'hello world' --prompt hi");
  BOOST_TEST_REQUIRE(file.rc == 0, file.output);
  BOOST_TEST(nlohmann::json::parse(file.output).at("data") == nlohmann::json::parse(two.output).at("data"));
  // --instruct: the model card's query form, "Instruct: TASK\nQuery:TEXT" (ids from `tokenizers`).
  result query = troupe_cli("embed --model " + dir.str() + " --instruct 'Find the greeting' --prompt 'hello world'");
  result query_ids = troupe_cli("embed --model " + src + " --ids 641,1235,25,7379,279,42113,198,2859,25,14990,1879,151643");
  BOOST_TEST_REQUIRE(query.rc == 0, query.output);
  BOOST_TEST(nlohmann::json::parse(query.output).at("data").at(0).at("embedding") ==
             nlohmann::json::parse(query_ids.output).at("data").at(0).at("embedding"));
  expect_cli_error("embed --model " + src + " --instruct T --ids 1,2", "--instruct applies to text prompts, not --ids");
  expect_cli_error("embed --model " + dir.str() + " --input-file " + dir.str("none.txt"), "--input-file: cannot read");
  troupe::test::write_file(dir.path() / "blank.txt", "\n\r\n");
  expect_cli_error("embed --model " + dir.str() + " --input-file " + dir.str("blank.txt"), "blank.txt has no text lines");

  // Untied and without lm_head (Qwen3-Embedding-8B's layout): the same embeddings (the hidden state
  // never reads lm_head), over two shards too; logits are refused, naming why.
  auto config = nlohmann::ordered_json::parse(troupe::test::read_file(dir.path() / "config.json"));
  config["tie_word_embeddings"] = false;
  troupe::test::write_file(dir.path() / "config.json", config.dump());
  result headless = troupe_cli("embed --model " + dir.str() + " --prompt 'hello world'");
  BOOST_TEST_REQUIRE(headless.rc == 0, headless.output);
  BOOST_TEST(nlohmann::json::parse(headless.output).at("data") == a.at("data"));
  result split = troupe_cli("embed --model " + dir.str() + " --prompt 'hello world' --tensor-parallel-size 2");
  BOOST_TEST_REQUIRE(split.rc == 0, split.output);
  const auto e1 = a.at("data").at(0).at("embedding").get<std::vector<double>>();
  const auto e2 = nlohmann::json::parse(split.output).at("data").at(0).at("embedding").get<std::vector<double>>();
  BOOST_REQUIRE_EQUAL(e1.size(), e2.size());
  for (size_t i = 0; i < e1.size(); ++i) BOOST_TEST(std::abs(e1[i] - e2[i]) <= 1e-5, "value " << i);
  expect_cli_error("generate --model " + dir.str() + " --ids 1,2 --max-tokens 2",
                   "has no lm_head.weight (a Qwen3Model export with untied embeddings");
}
