#include "runtime/model/generation_source.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/weight_files.hpp"

namespace troupe {

namespace fs = std::filesystem;
using json = nlohmann::json;

generation_defaults resolve_generation_config(const std::string& model_dir, const std::string& source,
                                              const std::string& override_json, const std::vector<int32_t>& config_eos) {
  json base = json::object();
  std::string where = "--generation-config " + source;
  if (source == "vllm") {
    base["do_sample"] = true;  // vLLM's SamplingParams: temperature 1, every other knob off
  } else {
    const bool model_own = source == "auto";
    const fs::path file = fs::path(model_own ? model_dir : source) / "generation_config.json";
    std::error_code ec;
    if (fs::exists(file, ec)) {
      where = file.string();
      const std::string text = read_text(file);
      (void)parse_generation_config(text, where);  // its own errors name the file
      base = json::parse(text);
    } else if (!model_own) {
      throw_error(errc::invalid_argument, "--generation-config " + source + ": there is no " + file.string() +
                                              " (expected auto, vllm, or a directory holding a generation_config.json)");
    }
  }
  if (!override_json.empty()) {
    json over;
    try {
      over = json::parse(override_json);
    } catch (const json::exception&) {
      over = nullptr;
    }
    if (!over.is_object())
      throw_error(errc::invalid_argument, "--override-generation-config: '" + override_json +
                                              "' is not a JSON object; expected one such as {\"temperature\": 0.5}");
    static const char* const known[] = {"temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                                        "do_sample", "max_new_tokens", "eos_token_id"};
    for (const auto& [k, v] : over.items()) {
      if (std::find(std::begin(known), std::end(known), k) == std::end(known))
        throw_error(errc::invalid_argument,
                    "--override-generation-config: unknown field '" + k +
                        "' (served: temperature, top_p, top_k, min_p, repetition_penalty, do_sample, max_new_tokens, "
                        "eos_token_id)");
      base[k] = v;
    }
    where = "--override-generation-config (over " + where + ")";
  }
  generation_defaults g = parse_generation_config(base.dump(), where);
  if (g.eos_token_ids.empty()) g.eos_token_ids = config_eos;
  return g;
}

}  // namespace troupe
