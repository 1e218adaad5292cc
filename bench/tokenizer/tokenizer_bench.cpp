// Tokenizer benchmark: load time, encode throughput on a JSONL corpus (one thread), and
// encode time of pathological inputs at 10 KB / 100 KB / 1 MB / 4 MB to show linear scaling.
// run_bench.py runs it next to Hugging Face `tokenizers` on the same corpus and compares ids.
//
//   tokenizer_bench --model models/qwen3-tokenizer --corpus corpus.jsonl [--repeat 3]
//                   [--ids-out ids.bin] [--skip-pathological]
//
// Prints one JSON object. --ids-out writes, per document, uint32 count then int32 ids.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/tokenizer.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<std::string> read_corpus(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw troupe::error(troupe::errc::io_error, "cannot open corpus " + path);
  std::vector<std::string> docs;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  return docs;
}

// One long input of `bytes` bytes built from `unit` (repeated) or random letters (no split points).
std::string pathological(const std::string& kind, size_t bytes) {
  std::string s;
  s.reserve(bytes + 4);
  if (kind == "random_letters") {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> letter('a', 'z');
    while (s.size() < bytes) s.push_back(static_cast<char>(letter(rng)));
    return s;
  }
  const std::string unit = kind == "spaces" ? " " : kind == "letter_a" ? "a" : kind == "cjk" ? "\xE4\xB8\x80" : "!";
  while (s.size() + unit.size() <= bytes) s += unit;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Troupe tokenizer benchmark"};
  std::string model = "models/qwen3-tokenizer", corpus, ids_out;
  int repeat = 3, loads = 5;
  bool skip_pathological = false;
  app.add_option("--model", model, "model directory with tokenizer.json");
  app.add_option("--corpus", corpus, "JSON lines {\"text\": ...} (bench/tokenizer/make_corpus.py)");
  app.add_option("--repeat", repeat, "encode passes over the corpus (best and median reported)");
  app.add_option("--loads", loads, "tokenizer loads to time");
  app.add_option("--ids-out", ids_out, "write the ids of the last pass here");
  app.add_flag("--skip-pathological", skip_pathological, "only load time and corpus throughput");
  CLI11_PARSE(app, argc, argv);

  try {
    nlohmann::ordered_json out;
    // Load time: wall and CPU (the dev machine is shared; CPU time is the steadier figure).
    std::vector<double> wall, cpu;
    for (int i = 0; i < loads; ++i) {
      double c0 = cpu_seconds();
      auto t0 = clock_type::now();
      troupe::tokenizer t(model);
      wall.push_back(seconds_since(t0) * 1e3);
      cpu.push_back((cpu_seconds() - c0) * 1e3);
    }
    out["load_ms"] = {{"median", median(wall)}, {"min", *std::min_element(wall.begin(), wall.end())},
                      {"cpu_median", median(cpu)}};
    troupe::tokenizer tok(model);

    if (!corpus.empty()) {
      std::vector<std::string> docs = read_corpus(corpus);
      size_t bytes = 0;
      for (const auto& d : docs) bytes += d.size();
      std::vector<std::vector<int32_t>> ids(docs.size());
      std::vector<double> mbps;
      size_t tokens = 0;
      for (int r = 0; r < repeat; ++r) {
        tokens = 0;
        auto t0 = clock_type::now();
        for (size_t i = 0; i < docs.size(); ++i) {
          ids[i].clear();
          tok.encode(docs[i], ids[i]);
          tokens += ids[i].size();
        }
        mbps.push_back(static_cast<double>(bytes) / 1e6 / seconds_since(t0));
      }
      out["corpus"] = {{"documents", docs.size()}, {"bytes", bytes}, {"tokens", tokens}};
      out["encode_mb_per_s"] = {{"best", *std::max_element(mbps.begin(), mbps.end())},
                                {"median", median(mbps)},
                                {"first", mbps.front()}};
      if (!ids_out.empty()) {
        std::ofstream f(ids_out, std::ios::binary);
        for (const auto& v : ids) {
          uint32_t n = static_cast<uint32_t>(v.size());
          f.write(reinterpret_cast<const char*>(&n), sizeof n);
          f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(int32_t)));
        }
      }
    }

    if (!skip_pathological) {
      nlohmann::ordered_json patho = nlohmann::ordered_json::object();
      for (const char* kind : {"letter_a", "spaces", "cjk", "punct", "random_letters"}) {
        // 4 MB shows the per-byte cost flat once the working set is out of cache.
        for (size_t size : {size_t{10'000}, size_t{100'000}, size_t{1'000'000}, size_t{4'000'000}}) {
          std::string text = pathological(kind, size);
          std::vector<double> ms;
          size_t n_ids = 0;
          for (int r = 0; r < 3; ++r) {
            auto t0 = clock_type::now();
            auto v = tok.encode(text);
            ms.push_back(seconds_since(t0) * 1e3);
            n_ids = v.size();
          }
          patho[kind][std::to_string(size / 1000) + "KB"] = {{"ms", *std::min_element(ms.begin(), ms.end())},
                                                             {"ids", n_ids}};
        }
      }
      out["pathological"] = patho;
    }
    std::cout << out.dump(1) << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
