// vLLM's runtime LoRA endpoints (served with [server] allow_runtime_lora_updating):
// POST /v1/load_lora_adapter {"lora_name", "lora_path"} and POST /v1/unload_lora_adapter
// {"lora_name"}, answered as vLLM answers them (plain text on success, OpenAI's error otherwise).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/wire/openai.hpp"

namespace troupe::wire::openai {

struct lora_request {
  std::string name;
  std::string path;  // load only
  api_error error;   // set when refused (name empty)
  bool ok() const noexcept { return !name.empty(); }
};

// `load`: the load body (lora_name and lora_path needed), else the unload body (lora_name;
// vLLM's lora_int_id accepted). `base`: the served model's name, which no adapter may take. Never
// throws.
lora_request parse_lora_request(std::string_view body, bool load, const served_models& models);

// vLLM's success texts.
std::string lora_loaded_text(const std::string& name);
std::string lora_unloaded_text(const std::string& name);

}  // namespace troupe::wire::openai
