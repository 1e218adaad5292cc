// `--device`: for `troupe serve` the flag reaches model.device, a bad value or a CPU-only feature
// beside cuda stops the start with the key named, and a troupe built without the CUDA engine says
// so; `troupe generate`, `logits` and `embed` check the same before reading the weights. And the
// parallel layouts' flags: pipeline stages give one stage's bytes, bad ones are refused by name.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

#include "runtime/engine/generator.hpp"
#include "runtime/serve/rerank.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "tests/runtime/model/seq_cls_checkpoint.hpp"
#include "tests/tools/troupe/run_troupe.hpp"

using troupe::testing::run_troupe;

namespace {
const std::string kModel = std::string(" --model ") + TROUPE_TEST_DATA_DIR "/golden/tiny-dense --port 0 --http-port -1 --metrics-port -1";

// `troupe ARGS` ends with exit 1 and says `needle`.
void expect_exit_1(const std::string& args, const std::string& needle) {
  const auto r = run_troupe(args);
  BOOST_TEST(r.exit_code == 1, args << ": " << r.output);
  BOOST_TEST(r.output.find(needle) != std::string::npos, args << ": " << r.output);
}

void expect_refused(const std::string& args, const std::string& needle) { expect_exit_1("serve" + kModel + " " + args, needle); }
}  // namespace

BOOST_AUTO_TEST_CASE(serve_device_flag_is_checked_before_the_model_loads) {
  expect_refused("--device tpu", "troupe serve: error: config: model.device = 'tpu'; expected cpu or cuda");
  expect_refused("--device cuda --kv-cache-dtype fp8",
                 "config: kv_cache.kv_cache_dtype = 'fp8' (the device pool is float32): with model.device = 'cuda' "
                 "(--device cuda) this runs on the CPU only");
  expect_refused("--device cuda --tensor-parallel-size 2", "model.tensor_parallel_size = 2 (CPU shards)");
  expect_refused("--device cuda --pipeline-parallel-size 2", "model.pipeline_parallel_size = 2 (CPU pipeline stages)");
  expect_refused("--pipeline-layers 1,x", "config: model.pipeline_layers (--pipeline-layers): '1,x' is not a comma-separated list");
  expect_refused("--pp 3", "pipeline_parallel_size 3 is more than the model's 2 layers");
  expect_refused("--pp 2 --pipeline-schedule eager",
                 "model.pipeline_schedule (--pipeline-schedule): 'eager' is not one of auto, wavefront, in_turn");
#ifndef TROUPE_HAVE_CUDA_SERVE
  // Without nvcc at configure time the binary has no CUDA backend to offer. (With it, a machine
  // without a device gets cuda_model_runner's "no CUDA device", one with a device a server: not
  // started here.)
  expect_refused("--device cuda", "model.device = 'cuda' (--device cuda): this troupe was built without CUDA");
#endif
}

// --chat-template reaches model.chat_template: one that is neither a file nor a template, or one
// beside a model served without a tokenizer, stops the start naming the key.
BOOST_AUTO_TEST_CASE(serve_chat_template_flag_is_checked_at_start) {
  const std::string tokenizer = std::string(" --tokenizer ") + TROUPE_SOURCE_DIR "/models/qwen3-tokenizer";
  expect_refused(tokenizer + " --chat-template /nonexistent/x.jinja",
                 "model.chat_template (--chat-template): chat template '/nonexistent/x.jinja' is neither a file nor a "
                 "template");
  expect_refused("--chat-template '{{ messages }}'",
                 "model.chat_template (--chat-template): the model is served without a tokenizer");
}

// The speculative flags reach [speculative]: vLLM's JSON and the flags are one or the other, a bad
// JSON is refused naming the key, and a draft model with no token count or on cuda stops the start.
BOOST_AUTO_TEST_CASE(serve_speculative_flags_are_checked_at_start) {
  const std::string draft = std::string(" --speculative-model ") + TROUPE_TEST_DATA_DIR "/golden/tiny-dense";
  expect_refused("--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 2}' --speculative-tokens 3",
                 "--speculative-config and --speculative-tokens / --speculative-model: give the JSON or the flags");
  expect_refused("--speculative-config '{\"method\": \"eagle\", \"model\": \"x\", \"num_speculative_tokens\": 2}'",
                 "--speculative-config: method 'eagle' is not one Troupe runs");
  expect_refused(draft, "speculative.model (--speculative-model) needs speculative.num_tokens (--speculative-tokens) > 0");
  expect_refused(draft + " --speculative-tokens 2 --device cuda", "a draft model runs on the CPU device only");
}

// A vLLM launch command's flags for Qwen3 run unchanged: the server starts (then stops on
// SIGINT); a reasoning parser for another format, or prefix caching both on and off, is refused.
BOOST_AUTO_TEST_CASE(vllm_launch_flags_are_accepted) {
  // The server in the background of the test's shell, stopped once it says it is ready (or after
  // 30 s), its output printed then.
  const auto r = run_troupe("serve" + kModel +
                            " --enable-auto-tool-choice --reasoning-parser qwen3 --enable-chunked-prefill "
                            "--enable-prefix-caching --trust-remote-code > /tmp/troupe-vllm-flags-$$.log 2>&1 & p=$!; "
                            "for i in $(seq 300); do grep -q ready /tmp/troupe-vllm-flags-$$.log && break; sleep 0.1; done; "
                            "kill -INT $p; wait $p; cat /tmp/troupe-vllm-flags-$$.log; rm -f /tmp/troupe-vllm-flags-$$.log");
  BOOST_TEST(r.output.find("ready") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("error") == std::string::npos, r.output);
  expect_refused("--reasoning-parser mistral", "--reasoning-parser mistral: Troupe reads Qwen3's <think> blocks");
  expect_refused("--enable-prefix-caching --no-prefix-cache", "give one of them");
}

BOOST_AUTO_TEST_CASE(version_flag_prints_the_projects_version) {
  const auto r = run_troupe("--version");
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output == "troupe " TROUPE_PROJECT_VERSION "\n");
}

BOOST_AUTO_TEST_CASE(generate_logits_and_embed_check_the_device_flag) {
  const std::string model = std::string(" --model ") + TROUPE_TEST_DATA_DIR "/golden/tiny-dense ";
  const std::pair<std::string, std::string> cases[] = {
      {"generate" + model + "--ids 1,2 --device tpu", "troupe generate: error: --device: 'tpu' is not one of cpu, cuda"},
      {"generate" + model + "--ids 1,2 --device cuda --kv-cache-dtype int8",
       "troupe generate: error: --kv-cache-dtype int8 (the device pool is float32) runs on the CPU only; not with --device cuda"},
      {"logits" + model + "--ids 1,2 --out /dev/null --device cuda --compute-dtype bf16",
       "troupe logits: error: --compute-dtype bf16 (the device computes float32) runs on the CPU only; not with --device cuda"},
      {"embed" + model + "--ids 1,2 --device cuda --tensor-parallel-size 2",
       "troupe embed: error: --tensor-parallel-size 2 (CPU shards) runs on the CPU only; not with --device cuda"},
      {"generate" + model + "--ids 1,2 --device cuda --pipeline-parallel-size 2",
       "troupe generate: error: --pipeline-parallel-size 2 (CPU pipeline stages) runs on the CPU only; not with --device cuda"},
      {"generate" + model + "--ids 1,2 --pipeline-parallel-size 0", "troupe generate: error: --pipeline-parallel-size must be >= 1"},
      {"logits" + model + "--ids 1,2 --out /dev/null --pp 2 --pipeline-layers 2,1",
       "troupe logits: error: pipeline_layers adds up to 3 layers; the model has 2"},
      {"generate" + model + "--ids 1,2 --device cuda --quantization int8",
       "--quantization int8 (the device takes fp8) runs on the CPU only; not with --device cuda"},
      {"generate" + model + "--ids 1,2 --device cuda --lora /nonexistent",
       "--lora (LoRA adapters) runs on the CPU only; not with --device cuda"},
#ifndef TROUPE_HAVE_CUDA_SERVE
      {"generate" + model + "--ids 1,2 --device cuda", "--device cuda: this troupe was built without CUDA"},
#endif
  };
  for (const auto& [args, needle] : cases) expect_exit_1(args, needle);
  // --device cpu is the default's path.
  const auto r = run_troupe("generate" + model + "--ids 1,2 --max-tokens 2 --temperature 0 --json --device cpu");
  BOOST_TEST(r.exit_code == 0, r.output);
}

// --pipeline-parallel-size 2 (--pp): each of tiny-dense's two layers on a stage of its own, the
// logits file the same bytes as one stage's, and the same greedy ids.
BOOST_AUTO_TEST_CASE(logits_and_generate_over_pipeline_stages_are_one_stages) {
  const std::string model = std::string(" --model ") + TROUPE_TEST_DATA_DIR "/golden/tiny-dense ";
  const auto dir = std::filesystem::temp_directory_path() / ("troupe-pp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string ids = " --ids 5,99,1000,7,42,3,3,3,17 ";
  auto read = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const auto one = run_troupe("logits" + model + ids + "--out " + (dir / "one.f32").string());
  const auto two = run_troupe("logits" + model + ids + "--pp 2 --out " + (dir / "two.f32").string());
  BOOST_TEST(one.exit_code == 0, one.output);
  BOOST_TEST(two.exit_code == 0, two.output);
  const std::string a = read(dir / "one.f32");
  BOOST_TEST(a.size() == size_t{9} * 4096 * sizeof(float));
  BOOST_TEST((a == read(dir / "two.f32")));
  const std::string gen = "generate" + model + ids + "--max-tokens 8 --temperature 0 --json";
  const auto g1 = run_troupe(gen), g2 = run_troupe(gen + " --pipeline-parallel-size 2 --pipeline-layers 1,1"),
             g3 = run_troupe(gen + " --pp 2 --pipeline-schedule wavefront");
  BOOST_TEST(g1.exit_code == 0, g1.output);
  BOOST_TEST(g1.output.find("\"ids\"") != std::string::npos, g1.output);
  BOOST_TEST(g2.output == g1.output);
  BOOST_TEST(g3.output == g1.output);
  std::filesystem::remove_all(dir);
}

// `troupe rerank`: an empty query or document ends with the reason and exit 1, before the model
// loads. (A vocabulary without "yes" and "no" is rerank_tokens_of's refusal, tested in rerank_test.)
BOOST_AUTO_TEST_CASE(rerank_refuses_what_it_cannot_score) {
  const std::string model = std::string(" --model ") + TROUPE_TEST_DATA_DIR "/golden/tiny-dense ";
  const std::pair<std::string, std::string> cases[] = {
      {"rerank" + model + "--query '' --document d", "troupe rerank: error: --query must not be empty"},
      {"rerank" + model + "--query q --document d --document ''", "troupe rerank: error: --document 1 is empty"},
  };
  for (const auto& [args, needle] : cases) expect_exit_1(args, needle);
}

// `troupe classify`: each input's probabilities are label_probs of the classifier's last logits row
// (the generator's, bit for bit through float32 JSON), its label the likeliest by name; an empty
// input ends with the reason before the model loads; a causal model is refused naming its class.
BOOST_AUTO_TEST_CASE(classify_prints_each_inputs_label_probabilities) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("troupe-cli-classify-" + std::to_string(::getpid()));
  troupe::test::write_seq_cls(TROUPE_TEST_DATA_DIR "/golden/e2e-full-vocab", dir.string(),
                              {{"positive", 9693}, {"negative", 2152}});
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(TROUPE_SOURCE_DIR "/models/qwen3-tokenizer") / f, dir / f);
  const std::vector<std::string> inputs = {"What a lovely day", "I hated it"};
  const auto r = run_troupe("classify --model " + dir.string() + " --input '" + inputs[0] + "' --input '" + inputs[1] + "'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  const auto j = nlohmann::json::parse(r.output);
  auto ck = troupe::load_checkpoint(dir.string());
  const troupe::tokenizer tok(dir.string());
  troupe::generator gen(*ck);
  BOOST_REQUIRE_EQUAL(j["data"].size(), 2u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto want = troupe::serve::label_probs(gen.last_logits(tok.encode_with_special_tokens(inputs[i])));
    const auto& d = j["data"][i];
    BOOST_TEST(d["num_classes"] == 2);
    BOOST_TEST(d["probs"][0].get<float>() == want[0]);
    BOOST_TEST(d["probs"][1].get<float>() == want[1]);
    BOOST_TEST(d["label"] == (want[0] >= want[1] ? "positive" : "negative"));
  }
  // --ids: the same body for token ids, no tokenizer read (the files are gone), ids checked.
  fs::remove(dir / "tokenizer.json");
  const std::vector<int32_t> ids = tok.encode_with_special_tokens(inputs[1]);
  std::string list;
  for (int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const auto by_ids = run_troupe("classify --model " + dir.string() + " --ids 5,6,7 --ids " + list);
  BOOST_TEST_REQUIRE(by_ids.exit_code == 0, by_ids.output);
  const auto k = nlohmann::json::parse(by_ids.output);
  BOOST_REQUIRE_EQUAL(k["data"].size(), 2u);
  BOOST_TEST(k["data"][1]["probs"] == j["data"][1]["probs"]);
  BOOST_TEST(k["usage"]["prompt_tokens"] == 3 + ids.size());
  const auto want = troupe::serve::label_probs(gen.last_logits({5, 6, 7}));
  BOOST_TEST(k["data"][0]["probs"][0].get<float>() == want[0]);
  expect_exit_1("classify --model " + dir.string() + " --ids 1,x", "--ids");
  expect_exit_1("classify --model " + dir.string() + " --ids 1,99999999", "token id 99999999 is outside the vocabulary");
  expect_exit_1("classify --model " + dir.string(), "give --input TEXT or --ids 1,2,3");
  // A classifier guesses no tokens: refused as a draft model, naming its class.
  expect_exit_1("generate --model " TROUPE_TEST_DATA_DIR "/golden/e2e-full-vocab --ids 1,2 --max-tokens 2 "
                "--speculative-tokens 2 --speculative-model " + dir.string(),
                "is a Qwen3ForSequenceClassification (label logits, no lm_head) and cannot guess tokens");
  fs::remove_all(dir);
}

// make-checkpoint --num-labels writes a random classifier that loads and classifies.
BOOST_AUTO_TEST_CASE(make_checkpoint_writes_a_classifier_that_classifies) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("troupe-cli-random-classifier-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const char* bad : {"0", "65537"}) {  // labels from 1 to max_num_labels
    const auto r = run_troupe("make-checkpoint --preset tiny --num-labels " + std::string(bad) + " --out " + dir.string());
    BOOST_TEST(r.exit_code != 0, bad);
    BOOST_TEST(r.output.find("--num-labels") != std::string::npos, r.output);
    BOOST_TEST(!fs::exists(dir), bad);
  }
  const auto made = run_troupe("make-checkpoint --preset tiny --num-labels 3 --out " + dir.string());
  BOOST_TEST_REQUIRE(made.exit_code == 0, made.output);
  BOOST_TEST(made.output.find("Qwen3ForSequenceClassification") != std::string::npos, made.output);
  auto ck = troupe::load_checkpoint(dir.string());
  BOOST_TEST(ck->config.num_labels == 3);
  BOOST_TEST(ck->weights.lm_head.rows == 3);
  const auto r = run_troupe("classify --model " + dir.string() + " --input 'one text' --input 'another'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  const auto j = nlohmann::json::parse(r.output);
  BOOST_REQUIRE_EQUAL(j["data"].size(), 2u);
  for (const auto& d : j["data"]) {
    BOOST_TEST(d["num_classes"] == 3);
    double sum = 0;
    for (const auto& p : d["probs"]) sum += p.get<double>();
    BOOST_TEST(sum == 1.0, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(d["label"].get<std::string>().rfind("LABEL_", 0) == 0u);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(classify_refuses_what_it_cannot_classify) {
  const std::string model = std::string(" --model ") + TROUPE_TEST_DATA_DIR "/golden/e2e-full-vocab ";
  const std::pair<std::string, std::string> cases[] = {
      {"classify" + model + "--input a --input ''", "troupe classify: error: --input 1 is empty"},
      {"classify" + model + "--input a",
       "e2e-full-vocab is not a sequence classifier (Qwen3ForCausalLM): classify needs a Qwen3ForSequenceClassification"},
  };
  for (const auto& [args, needle] : cases) expect_exit_1(args, needle);
}
