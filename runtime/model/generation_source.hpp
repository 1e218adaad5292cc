// Where a served model's default sampling comes from: vLLM's --generation-config (the model's own
// generation_config.json, none, or another directory's) and --override-generation-config (fields
// that replace or add to the chosen ones). Deployers use them to change a model's defaults
// (temperature, top_p, a cap on output tokens) without editing its files.
#pragma once

#include <string>
#include <vector>

#include "runtime/model/config.hpp"

namespace troupe {

// `source`: "auto" (model_dir/generation_config.json when there is one), "vllm" (no file: vLLM's
// own defaults, sampling at temperature 1), or a directory holding a generation_config.json.
// `override_json`: "" or a JSON object of generation_config.json fields (temperature, top_p,
// top_k, min_p, repetition_penalty, do_sample, max_new_tokens, eos_token_id) merged over the
// source's; an unknown field is refused naming it. eos_token_ids fall back to `config_eos`
// (config.json's). Throws troupe::error naming the option, the file and the field.
generation_defaults resolve_generation_config(const std::string& model_dir, const std::string& source,
                                              const std::string& override_json, const std::vector<int32_t>& config_eos);

}  // namespace troupe
