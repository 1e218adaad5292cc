#include "runtime/wire/openai_lora.hpp"

#include <algorithm>

#include "runtime/wire/openai_detail.hpp"

namespace troupe::wire::openai {

using namespace detail;

lora_request parse_lora_request(std::string_view body, bool load, const served_models& models) {
  lora_request out;
  try {
    const ojson b = parse_body(body);
    for (const auto& [k, v] : b.items()) {
      if (k == "lora_name" || (load && k == "lora_path")) {
        want(v, v.is_string() && !v.get<std::string>().empty(), k, "a non-empty string");
        (k == "lora_name" ? out.name : out.path) = v.get<std::string>();
      } else if ((load && k == "load_inplace") || (!load && k == "lora_int_id")) {
        // vLLM's: in-place reloading is refused below when asked; the id names nothing here.
        if (k == "load_inplace" && v == true)
          refuse("unsupported", k, "load_inplace is not supported: unload the adapter, then load it again");
      } else {
        refuse("unknown_field", k, "unknown field '" + k + "' for /v1/" + (load ? "load" : "unload") + "_lora_adapter");
      }
    }
    if (out.name.empty()) refuse("missing_field", "lora_name", "field 'lora_name' is needed");
    if (load && out.path.empty()) refuse("missing_field", "lora_path", "field 'lora_path' is needed");
    if (out.name == models.base ||
        std::find(models.aliases.begin(), models.aliases.end(), out.name) != models.aliases.end())
      refuse("invalid_value", "lora_name", "'" + out.name + "' is the served model's name; give the adapter another");
  } catch (const refusal& r) {
    out.name.clear();
    out.error = r.e;
  } catch (const std::exception& e) {
    out.name.clear();
    out.error = {400, std::string("the request body cannot be read: ") + e.what(), "malformed", ""};
  }
  return out;
}

std::string lora_loaded_text(const std::string& name) { return "Success: LoRA adapter '" + name + "' added successfully."; }
std::string lora_unloaded_text(const std::string& name) {
  return "Success: LoRA adapter '" + name + "' removed successfully.";
}

}  // namespace troupe::wire::openai
