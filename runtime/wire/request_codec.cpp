#include "runtime/wire/request_codec.hpp"

#include <cmath>
#include <limits>
#include <span>
#include <unordered_set>

#include "runtime/wire/json_msgpack.hpp"
#include "runtime/wire/msgpack_util.hpp"
#include "runtime/wire/utf8.hpp"

namespace troupe::wire {

namespace {

using detail::as_view;
using detail::type_name;

// Thrown inside this file only; decode_request turns it into a return value.
struct failure {
  error_code code;
  std::string message;
};

[[noreturn]] void fail(error_code code, std::string message) { throw failure{code, std::move(message)}; }

// One map's fields by name, each consumed at most once; reject() names any field left unread
// that the request kind does not define.
class field_map {
 public:
  field_map(const msgpack::object& map, std::string where) : where_(std::move(where)) {
    // A set, not a scan of fields_: a 550 KB map of distinct keys took the gateway 22 s that way.
    std::unordered_set<std::string_view> seen;
    for (uint32_t i = 0; i < map.via.map.size; ++i) {
      const auto& kv = map.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR)
        fail(error_code::malformed, where_ + ": map keys must be strings; got a " +
                                        std::string(type_name(kv.key)) + " key");
      auto name = as_view(kv.key);
      if (!seen.insert(name).second)
        fail(error_code::malformed, where_ + ": field '" + std::string(name) + "' appears twice");
      fields_.emplace_back(name, &kv.val);
    }
  }

  const msgpack::object* find(std::string_view name) const {
    for (const auto& f : fields_)
      if (f.first == name) return f.second;
    return nullptr;
  }

  // Every field must be one of `allowed`: the first that is not is named in the error.
  void check_known(std::span<const std::string_view> allowed, std::string_view kind) const {
    for (const auto& f : fields_) {
      bool known = false;
      for (auto a : allowed) known = known || a == f.first;
      if (!known) {
        if (!is_valid_utf8(f.first))
          fail(error_code::invalid_utf8, where_ + ": a field name is not valid UTF-8");
        fail(error_code::unknown_field, "unknown field '" + std::string(f.first) + "' in " +
                                            std::string(kind) + " (" + where_ + ")");
      }
    }
  }

 private:
  std::string where_;
  std::vector<std::pair<std::string_view, const msgpack::object*>> fields_;
};

[[noreturn]] void wrong_type(std::string_view field, std::string_view expected,
                             const msgpack::object& got) {
  fail(error_code::wrong_type, "field '" + std::string(field) + "' must be " +
                                   std::string(expected) + "; got " + std::string(type_name(got)));
}

std::string get_string(const msgpack::object& o, std::string_view field, size_t max_bytes) {
  if (o.type != msgpack::type::STR) wrong_type(field, "a string", o);
  auto s = as_view(o);
  if (!is_valid_utf8(s))
    fail(error_code::invalid_utf8, "field '" + std::string(field) + "' is not valid UTF-8 (byte " +
                                       std::to_string(valid_utf8_prefix(s)) + ")");
  if (s.size() > max_bytes)
    fail(error_code::invalid_value, "field '" + std::string(field) + "' has " +
                                        std::to_string(s.size()) + " bytes; at most " +
                                        std::to_string(max_bytes) + " are allowed");
  return std::string(s);
}

// Any msgpack integer in [lo, hi]; a float is a wrong type (no silent truncation).
int64_t get_int(const msgpack::object& o, std::string_view field, int64_t lo, int64_t hi) {
  int64_t v;
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(error_code::invalid_value, "field '" + std::string(field) + "' = " +
                                          std::to_string(o.via.u64) + " is out of range; expected " +
                                          std::to_string(lo) + ".." + std::to_string(hi));
    v = static_cast<int64_t>(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    v = o.via.i64;
  } else {
    wrong_type(field, "an integer", o);
  }
  if (v < lo || v > hi)
    fail(error_code::invalid_value, "field '" + std::string(field) + "' = " + std::to_string(v) +
                                        " is out of range; expected " + std::to_string(lo) + ".." +
                                        std::to_string(hi));
  return v;
}

uint64_t get_u64(const msgpack::object& o, std::string_view field) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER)
    fail(error_code::invalid_value, "field '" + std::string(field) + "' = " +
                                        std::to_string(o.via.i64) + " must be >= 0");
  if (o.type != msgpack::type::POSITIVE_INTEGER) wrong_type(field, "an integer", o);
  return o.via.u64;
}

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A number (integer or float) in a range; `lo_open` excludes lo itself.
double get_number(const msgpack::object& o, std::string_view field, double lo, bool lo_open,
                  double hi) {
  double v;
  if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64)
    v = o.via.f64;
  else if (o.type == msgpack::type::POSITIVE_INTEGER)
    v = static_cast<double>(o.via.u64);
  else if (o.type == msgpack::type::NEGATIVE_INTEGER)
    v = static_cast<double>(o.via.i64);
  else
    wrong_type(field, "a number", o);
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo) || v > hi)
    fail(error_code::invalid_value, "field '" + std::string(field) + "' = " + fmt_double(v) +
                                        " is out of range; expected " + (lo_open ? "(" : "[") +
                                        fmt_double(lo) + ", " + fmt_double(hi) + "]");
  return v;
}

bool get_bool(const msgpack::object& o, std::string_view field) {
  if (o.type != msgpack::type::BOOLEAN) wrong_type(field, "a bool", o);
  return o.via.boolean;
}

const msgpack::object_array& get_array(const msgpack::object& o, std::string_view field,
                                       size_t min_size, size_t max_size) {
  if (o.type != msgpack::type::ARRAY) wrong_type(field, "an array", o);
  if (o.via.array.size < min_size || o.via.array.size > max_size)
    fail(error_code::invalid_value,
         "field '" + std::string(field) + "' has " + std::to_string(o.via.array.size) +
             " elements; expected " + std::to_string(min_size) + ".." + std::to_string(max_size));
  return o.via.array;
}

std::vector<int32_t> get_ids(const msgpack::object& o, std::string_view field, size_t min_size,
                             size_t max_size) {
  const auto& a = get_array(o, field, min_size, max_size);
  std::vector<int32_t> ids;
  ids.reserve(a.size);
  for (uint32_t i = 0; i < a.size; ++i) {
    std::string name = std::string(field) + "[" + std::to_string(i) + "]";
    ids.push_back(static_cast<int32_t>(get_int(a.ptr[i], name, 0, std::numeric_limits<int32_t>::max())));
  }
  return ids;
}

// An array of min_size..max_size non-empty strings of at most max_bytes each (stop, bad_words).
std::vector<std::string> get_strings(const msgpack::object& o, std::string_view field, size_t min_size,
                                     size_t max_size, size_t max_bytes) {
  const auto& a = get_array(o, field, min_size, max_size);
  std::vector<std::string> out;
  for (uint32_t i = 0; i < a.size; ++i) {
    auto name = std::string(field) + "[" + std::to_string(i) + "]";
    out.push_back(get_string(a.ptr[i], name, max_bytes));
    if (out.back().empty()) fail(error_code::invalid_value, "field '" + name + "' must not be empty");
  }
  return out;
}

std::string get_id(const field_map& f, bool required, std::string_view kind) {
  const auto* o = f.find("id");
  if (!o) {
    if (required) fail(error_code::missing_field, "a " + std::string(kind) + " request needs field 'id'");
    return {};
  }
  auto id = get_string(*o, "id", max_id_bytes);
  if (required && id.empty()) fail(error_code::invalid_value, "field 'id' must not be empty");
  return id;
}

// A free-form value (tools, tool calls) as JSON text; `where` names it in errors.
std::string get_json(const msgpack::object& o, const std::string& where) {
  try {
    return detail::to_json_text(o, where);
  } catch (const std::invalid_argument& e) {
    fail(error_code::invalid_value, e.what());
  }
}

// An array of 1..max_items maps, as JSON text.
std::string get_map_array(const msgpack::object& o, const std::string& where, uint32_t max_items) {
  const auto& a = get_array(o, where, 1, max_items);
  for (uint32_t i = 0; i < a.size; ++i)
    if (a.ptr[i].type != msgpack::type::MAP) wrong_type(where + "[" + std::to_string(i) + "]", "a map", a.ptr[i]);
  return get_json(o, where);
}

// OpenAI's form: a map from token id to bias, the id written as a decimal string (JSON keys are
// strings) or, in msgpack, as an integer.
std::vector<std::pair<int32_t, double>> get_logit_bias(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) wrong_type("logit_bias", "a map of token id -> bias", o);
  if (o.via.map.size > max_logit_bias)
    fail(error_code::invalid_value, "field 'logit_bias' has " + std::to_string(o.via.map.size) +
                                        " entries; at most " + std::to_string(max_logit_bias) + " are allowed");
  std::vector<std::pair<int32_t, double>> out;
  std::unordered_set<int32_t> seen;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    int64_t id = -1;
    std::string shown;
    if (kv.key.type == msgpack::type::STR) {
      const std::string_view k = as_view(kv.key);
      shown = std::string(k.substr(0, 32));
      if (!k.empty() && k.size() <= 10 && k.find_first_not_of("0123456789") == std::string_view::npos) id = std::stoll(std::string(k));
    } else if (kv.key.type == msgpack::type::POSITIVE_INTEGER) {
      id = kv.key.via.u64 <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()) ? static_cast<int64_t>(kv.key.via.u64) : -1;
      shown = std::to_string(kv.key.via.u64);
    } else {
      wrong_type("logit_bias key", "a token id (a decimal string or an integer)", kv.key);
    }
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      fail(error_code::invalid_value, "field 'logit_bias' has key '" + shown + "', which is not a token id");
    if (!seen.insert(static_cast<int32_t>(id)).second)
      fail(error_code::invalid_value, "field 'logit_bias' names token " + std::to_string(id) + " twice");
    out.emplace_back(static_cast<int32_t>(id), get_number(kv.val, "logit_bias[\"" + std::to_string(id) + "\"]", -100, false, 100));
  }
  return out;
}

std::vector<chat_message> get_messages(const msgpack::object& o) {
  const auto& a = get_array(o, "messages", 1, std::numeric_limits<uint32_t>::max());
  std::vector<chat_message> out;
  for (uint32_t i = 0; i < a.size; ++i) {
    std::string where = "messages[" + std::to_string(i) + "]";
    if (a.ptr[i].type != msgpack::type::MAP) wrong_type(where, "a map", a.ptr[i]);
    field_map m(a.ptr[i], where);
    static constexpr std::string_view allowed[] = {"role", "content", "reasoning_content", "tool_calls"};
    m.check_known(allowed, "a chat message");
    chat_message msg;
    const auto* role = m.find("role");
    if (!role) fail(error_code::missing_field, where + " needs field 'role'");
    msg.role = get_string(*role, where + ".role", 32);
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      fail(error_code::invalid_value, "field '" + where + ".role' = '" + msg.role +
                                          "'; expected system, user, assistant or tool");
    if (const auto* calls = m.find("tool_calls")) {
      if (msg.role != "assistant")
        fail(error_code::invalid_value, "field '" + where + ".tool_calls' belongs to assistant turns; this one is '" +
                                            msg.role + "'");
      msg.tool_calls_json = get_map_array(*calls, where + ".tool_calls", max_tools);
    }
    // An assistant turn that only calls tools may leave content out (OpenAI sends null).
    const auto* content = m.find("content");
    if (content && !(content->type == msgpack::type::NIL && !msg.tool_calls_json.empty()))
      msg.content = get_string(*content, where + ".content", std::numeric_limits<uint32_t>::max());
    else if (msg.tool_calls_json.empty())
      fail(error_code::missing_field, where + " needs field 'content'");
    if (const auto* r = m.find("reasoning_content"))
      msg.reasoning_content = get_string(*r, where + ".reasoning_content",
                                         std::numeric_limits<uint32_t>::max());
    out.push_back(std::move(msg));
  }
  return out;
}

// A JSON schema: a map or a boolean (true: anything, false: nothing), or its JSON text.
std::string get_schema(const msgpack::object& o, const std::string& where) {
  if (o.type == msgpack::type::STR) {
    // JSON text becomes the value it writes, then the text that value gives, so the text and the
    // map forms of one schema decode (and re-encode) to the same thing.
    const std::string text = get_string(o, where, std::numeric_limits<uint32_t>::max());
    std::string packed;
    detail::string_sink sink{&packed};
    try {
      detail::pack_json_text(sink, text);
    } catch (const std::exception&) {
      fail(error_code::invalid_value, "field '" + where + "' is not JSON text");
    }
    size_t off = 0;
    const auto oh = msgpack::unpack(packed.data(), packed.size(), off);
    const auto& v = oh.get();
    if (v.type != msgpack::type::MAP && v.type != msgpack::type::BOOLEAN)
      wrong_type(where, "a JSON schema (a map, a boolean or JSON text)", v);
    return get_json(v, where);
  }
  if (o.type != msgpack::type::MAP && o.type != msgpack::type::BOOLEAN)
    wrong_type(where, "a JSON schema (a map, a boolean or JSON text)", o);
  return get_json(o, where);
}

// OpenAI's response_format: {"type": "text" | "json_object" | "json_schema", "json_schema":
// {"name", "schema", "strict", "description"}}.
structured_output get_response_format(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) wrong_type("response_format", "a map", o);
  field_map m(o, "response_format");
  static constexpr std::string_view allowed[] = {"type", "json_schema"};
  m.check_known(allowed, "response_format");
  const auto* type = m.find("type");
  if (!type) fail(error_code::missing_field, "field 'response_format' needs 'type'");
  const std::string t = get_string(*type, "response_format.type", 32);
  structured_output out;
  const auto* js = m.find("json_schema");
  if (js && t != "json_schema")
    fail(error_code::invalid_value, "field 'response_format.json_schema' belongs to type 'json_schema', not '" + t + "'");
  if (t == "text") return out;
  if (t == "json_object") {
    out.k = structured_output::kind::json_object;
    return out;
  }
  if (t != "json_schema")
    fail(error_code::invalid_value, "field 'response_format.type' = '" + t + "'; expected text, json_object or json_schema");
  if (!js) fail(error_code::missing_field, "response_format of type 'json_schema' needs field 'json_schema'");
  if (js->type != msgpack::type::MAP) wrong_type("response_format.json_schema", "a map", *js);
  field_map j(*js, "response_format.json_schema");
  static constexpr std::string_view allowed_js[] = {"name", "schema", "strict", "description"};
  j.check_known(allowed_js, "response_format.json_schema");
  if (const auto* n = j.find("name")) get_string(*n, "response_format.json_schema.name", 256);
  if (const auto* d = j.find("description")) get_string(*d, "response_format.json_schema.description", 65536);
  if (const auto* st = j.find("strict")) get_bool(*st, "response_format.json_schema.strict");
  const auto* schema = j.find("schema");
  if (!schema) fail(error_code::missing_field, "field 'response_format.json_schema' needs 'schema'");
  out.k = structured_output::kind::json_schema;
  out.spec = get_schema(*schema, "response_format.json_schema.schema");
  return out;
}

// vLLM's structured_outputs: exactly one of json, regex, choice, grammar, json_object.
structured_output get_structured_outputs(const msgpack::object& o) {
  if (o.type != msgpack::type::MAP) wrong_type("structured_outputs", "a map", o);
  field_map m(o, "structured_outputs");
  static constexpr std::string_view allowed[] = {"json", "regex", "choice", "grammar", "json_object"};
  m.check_known(allowed, "structured_outputs");
  structured_output out;
  int given = 0;
  if (const auto* v = m.find("json")) {
    ++given;
    out.k = structured_output::kind::json_schema;
    out.spec = get_schema(*v, "structured_outputs.json");
  }
  if (const auto* v = m.find("regex")) {
    ++given;
    out.k = structured_output::kind::regex;
    out.spec = get_string(*v, "structured_outputs.regex", 65536);
    if (out.spec.empty()) fail(error_code::invalid_value, "field 'structured_outputs.regex' must not be empty");
  }
  if (const auto* v = m.find("choice")) {
    ++given;
    out.k = structured_output::kind::choice;
    out.choices = get_strings(*v, "structured_outputs.choice", 1, max_choices, max_choice_bytes);
  }
  if (const auto* v = m.find("grammar")) {
    ++given;
    out.k = structured_output::kind::grammar;
    out.spec = get_string(*v, "structured_outputs.grammar", 1 << 20);
    if (out.spec.empty()) fail(error_code::invalid_value, "field 'structured_outputs.grammar' must not be empty");
  }
  if (const auto* v = m.find("json_object")) {
    if (!get_bool(*v, "structured_outputs.json_object"))
      fail(error_code::invalid_value, "field 'structured_outputs.json_object' can only be true");
    ++given;
    out.k = structured_output::kind::json_object;
  }
  if (given != 1)
    fail(error_code::invalid_value, "field 'structured_outputs' needs exactly one of json, regex, choice, grammar, json_object");
  return out;
}

template <class Req>
void get_chat_fields(const field_map& f, Req& r);

// The prompt of a generate or tokenize: exactly one of the allowed forms.
template <class Req>
void get_prompt(const field_map& f, Req& r, bool ids_allowed) {
  const auto* text = f.find("prompt");
  const auto* ids = ids_allowed ? f.find("prompt_ids") : nullptr;
  const auto* msgs = f.find("messages");
  int given = (text != nullptr) + (ids != nullptr) + (msgs != nullptr);
  std::string forms = ids_allowed ? "'prompt', 'prompt_ids' or 'messages'" : "'prompt' or 'messages'";
  if (given == 0) fail(error_code::missing_field, "the request needs one of " + forms);
  if (given > 1) fail(error_code::invalid_value, "give only one of " + forms);
  if (text) {
    r.kind = prompt_kind::text;
    r.prompt = get_string(*text, "prompt", std::numeric_limits<uint32_t>::max());
    if (r.prompt.empty()) fail(error_code::invalid_value, "field 'prompt' must not be empty");
  } else if (msgs) {
    r.kind = prompt_kind::messages;
    r.messages = get_messages(*msgs);
  } else {
    if constexpr (requires { r.prompt_ids; }) {
      r.kind = prompt_kind::ids;
      r.prompt_ids = get_ids(*ids, "prompt_ids", 1, std::numeric_limits<uint32_t>::max());
    }
  }
  get_chat_fields(f, r);
}

// The fields only a `messages` prompt takes (r.kind says which prompt came): each refused beside
// any other prompt.
template <class Req>
void get_chat_fields(const field_map& f, Req& r) {
  if (const auto* t = f.find("enable_thinking")) {
    if (r.kind != prompt_kind::messages)
      fail(error_code::invalid_value, "field 'enable_thinking' applies only to 'messages' prompts");
    r.enable_thinking = get_bool(*t, "enable_thinking");
  }
  for (auto [name, field] : {std::pair{"add_generation_prompt", &Req::add_generation_prompt},
                             {"continue_final_message", &Req::continue_final_message}}) {
    const auto* t = f.find(name);
    if (!t) continue;
    if (r.kind != prompt_kind::messages)
      fail(error_code::invalid_value, "field '" + std::string(name) + "' applies only to 'messages' prompts");
    r.*field = get_bool(*t, name);
  }
  if (r.add_generation_prompt && r.continue_final_message)
    fail(error_code::invalid_value, "field 'continue_final_message' needs 'add_generation_prompt' false (the model "
                                    "continues the final message instead of starting its own turn)");
  if (const auto* t = f.find("tools")) {
    if (r.kind != prompt_kind::messages)
      fail(error_code::invalid_value, "field 'tools' applies only to 'messages' prompts");
    r.tools_json = get_map_array(*t, "tools", max_tools);
  }
  if (const auto* t = f.find("chat_template_kwargs")) {
    if (r.kind != prompt_kind::messages)
      fail(error_code::invalid_value, "field 'chat_template_kwargs' applies only to 'messages' prompts");
    if (t->type != msgpack::type::MAP) wrong_type("chat_template_kwargs", "a map", *t);
    for (uint32_t i = 0; i < t->via.map.size; ++i) {
      const auto& k = t->via.map.ptr[i].key;
      if (k.type != msgpack::type::STR) wrong_type("chat_template_kwargs", "a map with text keys", k);
      const std::string_view name = detail::as_view(k);
      if (is_reserved_template_variable(name))
        fail(error_code::invalid_value,
             "field 'chat_template_kwargs." + std::string(name) + "' is not a template switch: " +
                 (name == "enable_thinking" ? std::string("give it as the field 'enable_thinking'")
                                            : "the request's own fields set it"));
    }
    r.template_kwargs_json = t->via.map.size == 0 ? std::string() : get_json(*t, "chat_template_kwargs");
  }
  if (const auto* t = f.find("chat_template")) {
    if (r.kind != prompt_kind::messages)
      fail(error_code::invalid_value, "field 'chat_template' applies only to 'messages' prompts");
    r.chat_template = get_string(*t, "chat_template", max_chat_template_bytes);
    if (r.chat_template.empty()) fail(error_code::invalid_value, "field 'chat_template' must not be empty (leave it out for the server's)");
  }
}

// A batch of prompts: 1..max_n texts or arrays of token ids (each element judged on its own).
std::vector<batch_prompt> get_batch(const msgpack::object& o) {
  const auto& a = get_array(o, "prompts", 1, max_n);
  std::vector<batch_prompt> out(a.size);
  for (uint32_t i = 0; i < a.size; ++i) {
    const auto name = "prompts[" + std::to_string(i) + "]";
    auto& p = out[i];
    if (a.ptr[i].type == msgpack::type::ARRAY) {
      p.kind = prompt_kind::ids;
      p.ids = get_ids(a.ptr[i], name, 1, std::numeric_limits<uint32_t>::max());
    } else {
      if (a.ptr[i].type != msgpack::type::STR) wrong_type(name, "a text or an array of token ids", a.ptr[i]);
      p.text = get_string(a.ptr[i], name, std::numeric_limits<uint32_t>::max());
      if (p.text.empty()) fail(error_code::invalid_value, "field '" + name + "' must not be empty");
    }
  }
  return out;
}

// truncate_prompt_tokens (generate and embed): -1 (as many as fit) or a positive count.
void get_truncation(const field_map& f, generate_request& r) {
  const auto* o = f.find("truncate_prompt_tokens");
  if (!o) return;
  const auto k = get_int(*o, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max());
  if (k == 0) fail(error_code::invalid_value, "field 'truncate_prompt_tokens' must be -1 (as many as fit) or >= 1");
  r.truncate_prompt_tokens = static_cast<int32_t>(k);
}

// The scheduling fields generate and embed share: priority, tenant, deadline_ms.
void get_scheduling(const field_map& f, generate_request& r) {
  if (const auto* o = f.find("priority"))
    r.priority = static_cast<int32_t>(get_int(*o, "priority", std::numeric_limits<int32_t>::min(),
                                              std::numeric_limits<int32_t>::max()));
  if (const auto* o = f.find("tenant")) r.tenant = get_string(*o, "tenant", max_tenant_bytes);
  if (const auto* o = f.find("deadline_ms"))
    r.deadline_ms = static_cast<uint32_t>(get_int(*o, "deadline_ms", 1, std::numeric_limits<uint32_t>::max()));
}

// Beam search keeps the n best beams of its own loop: what shapes one sampled sequence does not
// apply, and is refused by name rather than ignored.
void check_beam_search(const generate_request& r) {
  if (r.n > max_beam_width)
    fail(error_code::invalid_value, "field 'n' is the beam width with 'use_beam_search': at most " +
                                        std::to_string(max_beam_width) + "; got " + std::to_string(r.n));
  auto refuse = [](const char* field) {
    fail(error_code::invalid_value, std::string("field '") + field + "' does not apply to 'use_beam_search'");
  };
  if (r.logprobs) refuse("logprobs");
  if (r.prompt_logprobs) refuse("prompt_logprobs");
  if (r.structured.k != structured_output::kind::none) refuse("response_format");
  if (r.min_tokens.value_or(0) > 0) refuse("min_tokens");
  if (!r.allowed_token_ids.empty()) refuse("allowed_token_ids");
  if (!r.logit_bias.empty()) refuse("logit_bias");
  if (!r.bad_words.empty()) refuse("bad_words");
  if (r.thinking_token_budget.value_or(-1) >= 0) refuse("thinking_token_budget");
}

generate_request decode_generate(const field_map& f) {
  static constexpr std::string_view allowed[] = {
      "v", "type", "id", "prompt", "prompt_ids", "messages", "enable_thinking", "add_generation_prompt",
      "continue_final_message", "tools", "chat_template_kwargs", "chat_template", "temperature",
      "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty",
      "seed", "max_tokens", "stop", "include_stop_str_in_output", "skip_special_tokens", "stop_ids", "ignore_eos", "return_prompt_ids", "stream", "priority", "tenant", "adapter",
      "deadline_ms", "logprobs", "separate_reasoning", "min_tokens", "allowed_token_ids", "logit_bias", "prompt_logprobs", "bad_words",
      "response_format", "structured_outputs", "n", "prompts", "truncate_prompt_tokens", "cache_salt",
      "truncate_messages", "thinking_token_budget", "use_beam_search", "length_penalty"};
  f.check_known(allowed, "a generate request");
  generate_request r;
  r.id = get_id(f, true, "generate");
  if (const auto* ps = f.find("prompts")) {
    if (f.find("prompt") || f.find("prompt_ids") || f.find("messages"))
      fail(error_code::invalid_value, "give only one of 'prompt', 'prompt_ids', 'messages' or 'prompts'");
    r.prompts = get_batch(*ps);
    get_chat_fields(f, r);  // no messages in a batch: each of those fields is refused
  } else {
    get_prompt(f, r, true);
  }
  auto& s = r.sampling;
  if (const auto* o = f.find("temperature")) s.temperature = get_number(*o, "temperature", 0, false, 100);
  if (const auto* o = f.find("top_p")) s.top_p = get_number(*o, "top_p", 0, true, 1);
  if (const auto* o = f.find("top_k"))
    s.top_k = static_cast<int32_t>(get_int(*o, "top_k", -1, std::numeric_limits<int32_t>::max()));
  if (const auto* o = f.find("min_p")) s.min_p = get_number(*o, "min_p", 0, false, 1);
  if (const auto* o = f.find("repetition_penalty"))
    s.repetition_penalty = get_number(*o, "repetition_penalty", 0, true, 100);
  if (const auto* o = f.find("presence_penalty"))
    s.presence_penalty = get_number(*o, "presence_penalty", -2, false, 2);
  if (const auto* o = f.find("frequency_penalty"))
    s.frequency_penalty = get_number(*o, "frequency_penalty", -2, false, 2);
  if (const auto* o = f.find("seed")) s.seed = get_u64(*o, "seed");
  if (const auto* o = f.find("max_tokens"))
    r.max_tokens = static_cast<int32_t>(get_int(*o, "max_tokens", 1, std::numeric_limits<int32_t>::max()));
  if (const auto* o = f.find("stop")) r.stop = get_strings(*o, "stop", 0, max_stop_strings, max_stop_string_bytes);
  if (const auto* o = f.find("include_stop_str_in_output"))
    r.include_stop_str_in_output = get_bool(*o, "include_stop_str_in_output");
  if (const auto* o = f.find("skip_special_tokens")) r.skip_special_tokens = get_bool(*o, "skip_special_tokens");
  if (const auto* o = f.find("stop_ids")) r.stop_ids = get_ids(*o, "stop_ids", 0, max_stop_ids);
  if (const auto* o = f.find("ignore_eos")) r.ignore_eos = get_bool(*o, "ignore_eos");
  if (const auto* o = f.find("return_prompt_ids")) r.return_prompt_ids = get_bool(*o, "return_prompt_ids");
  if (const auto* o = f.find("stream")) r.stream = get_bool(*o, "stream");
  get_scheduling(f, r);
  if (const auto* o = f.find("adapter")) r.adapter = get_string(*o, "adapter", max_adapter_name_bytes);
  if (const auto* o = f.find("cache_salt")) {
    r.cache_salt = get_string(*o, "cache_salt", max_cache_salt_bytes);
    if (r.cache_salt.empty()) fail(error_code::invalid_value, "field 'cache_salt' must not be empty (leave it out for none)");
  }
  if (const auto* o = f.find("logprobs")) r.logprobs = static_cast<int32_t>(get_int(*o, "logprobs", 0, max_logprobs));
  if (const auto* o = f.find("separate_reasoning")) r.separate_reasoning = get_bool(*o, "separate_reasoning");
  if (const auto* o = f.find("min_tokens"))
    r.min_tokens = static_cast<int32_t>(get_int(*o, "min_tokens", 0, std::numeric_limits<int32_t>::max()));
  if (const auto* o = f.find("allowed_token_ids")) r.allowed_token_ids = get_ids(*o, "allowed_token_ids", 1, max_allowed_token_ids);
  if (const auto* o = f.find("logit_bias")) r.logit_bias = get_logit_bias(*o);
  if (const auto* o = f.find("bad_words")) {
    r.bad_words = get_strings(*o, "bad_words", 1, max_bad_words, max_stop_string_bytes);
    for (size_t i = 0; i < r.bad_words.size(); ++i)
      if (r.bad_words[i].find_first_not_of(" \t\n\r\f\v") == std::string::npos)
        fail(error_code::invalid_value, "field 'bad_words[" + std::to_string(i) + "]' must hold a word, not only whitespace");
  }
  if (const auto* o = f.find("prompt_logprobs"))
    r.prompt_logprobs = static_cast<int32_t>(get_int(*o, "prompt_logprobs", 0, max_logprobs));
  const auto* rf = f.find("response_format");
  const auto* so = f.find("structured_outputs");
  if (rf && so) fail(error_code::invalid_value, "give only one of 'response_format' and 'structured_outputs'");
  if (rf) r.structured = get_response_format(*rf);
  if (so) r.structured = get_structured_outputs(*so);
  if (const auto* o = f.find("n")) r.n = static_cast<int32_t>(get_int(*o, "n", 1, max_n));
  get_truncation(f, r);
  if (const auto* o = f.find("thinking_token_budget"))
    r.thinking_token_budget =
        static_cast<int32_t>(get_int(*o, "thinking_token_budget", -1, std::numeric_limits<int32_t>::max()));
  if (const auto* o = f.find("truncate_messages")) {
    if (r.kind != prompt_kind::messages || !r.prompts.empty())
      fail(error_code::invalid_value, "field 'truncate_messages' applies only to 'messages' prompts");
    r.truncate_messages = get_bool(*o, "truncate_messages");
  }
  if (const auto* o = f.find("length_penalty")) r.length_penalty = get_number(*o, "length_penalty", -10, false, 10);
  if (const auto* o = f.find("use_beam_search")) r.use_beam_search = get_bool(*o, "use_beam_search");
  if (r.use_beam_search) check_beam_search(r);
  if (r.sequences() > max_n)
    fail(error_code::invalid_value, "'prompts' (" + std::to_string(r.prompts.size()) + ") times 'n' (" +
                                        std::to_string(r.n) + ") asks for more than " + std::to_string(max_n) +
                                        " completions in one request");
  return r;
}

// An embed request: `input` is a text, an array of texts, an array of token ids or an array of
// such arrays (OpenAI's forms); each input becomes one completion of a generate_request.
generate_request decode_embed(const field_map& f) {
  static constexpr std::string_view allowed[] = {"v",        "type",   "id",          "input",
                                                 "dimensions", "normalize", "task",      "priority",
                                                 "tenant",   "deadline_ms", "truncate_prompt_tokens"};
  f.check_known(allowed, "an embed request");
  generate_request r;
  r.id = get_id(f, true, "embed");
  embed_fields e;
  const auto* in = f.find("input");
  if (!in) fail(error_code::missing_field, "an embed request needs field 'input' (a text, texts, token ids, or arrays of them)");
  if (in->type == msgpack::type::STR) {
    e.texts.push_back(get_string(*in, "input", std::numeric_limits<uint32_t>::max()));
  } else if (in->type == msgpack::type::ARRAY && in->via.array.size > 0 &&
             in->via.array.ptr[0].type == msgpack::type::STR) {
    e.texts = get_strings(*in, "input", 1, max_embed_inputs, std::numeric_limits<uint32_t>::max());
  } else if (in->type == msgpack::type::ARRAY && in->via.array.size > 0 &&
             in->via.array.ptr[0].type == msgpack::type::ARRAY) {
    const auto& a = get_array(*in, "input", 1, max_embed_inputs);
    for (uint32_t i = 0; i < a.size; ++i)
      e.ids.push_back(get_ids(a.ptr[i], "input[" + std::to_string(i) + "]", 1, std::numeric_limits<uint32_t>::max()));
  } else {
    e.ids.push_back(get_ids(*in, "input", 1, std::numeric_limits<uint32_t>::max()));
  }
  for (size_t i = 0; i < e.texts.size(); ++i)
    if (e.texts[i].empty()) fail(error_code::invalid_value, "field 'input" + (e.texts.size() > 1 ? "[" + std::to_string(i) + "]" : std::string()) + "' must not be empty");
  if (const auto* o = f.find("task")) {
    const std::string task = get_string(*o, "task", 16);
    if (task != "embed" && task != "classify")
      fail(error_code::invalid_value, "field 'task' = '" + task + "'; expected embed or classify");
    e.classify = task == "classify";
  }
  for (const char* name : {"dimensions", "normalize"})
    if (e.classify && f.find(name))
      fail(error_code::invalid_value, std::string("field '") + name + "' shapes an embedding; task 'classify' gives label "
                                                                     "probabilities");
  if (const auto* o = f.find("dimensions"))
    e.dimensions = static_cast<int32_t>(get_int(*o, "dimensions", 1, std::numeric_limits<int32_t>::max()));
  if (const auto* o = f.find("normalize")) e.normalize = get_bool(*o, "normalize");
  get_scheduling(f, r);
  get_truncation(f, r);
  r.n = static_cast<int32_t>(e.texts.empty() ? e.ids.size() : e.texts.size());
  r.stream = false;
  r.max_tokens = 1;
  r.embed = std::move(e);
  return r;
}

// A rerank request: a query (or one query per document) and documents (texts), each document one
// completion.
generate_request decode_rerank(const field_map& f) {
  static constexpr std::string_view allowed[] = {"v", "type", "id", "query", "queries", "documents", "instruction",
                                                 "priority", "tenant", "deadline_ms"};
  f.check_known(allowed, "a rerank request");
  generate_request r;
  r.id = get_id(f, true, "rerank");
  rerank_fields k;
  const auto* q = f.find("query");
  const auto* qs = f.find("queries");
  if (q && qs) fail(error_code::invalid_value, "a rerank request takes 'query' or 'queries', not both");
  if (!q && !qs) fail(error_code::missing_field, "a rerank request needs field 'query' (a text)");
  if (q) {
    k.queries.push_back(get_string(*q, "query", std::numeric_limits<uint32_t>::max()));
    if (k.queries[0].empty()) fail(error_code::invalid_value, "field 'query' must not be empty");
  }
  const auto* d = f.find("documents");
  if (!d) fail(error_code::missing_field, "a rerank request needs field 'documents' (an array of texts)");
  k.documents = get_strings(*d, "documents", 1, max_embed_inputs, std::numeric_limits<uint32_t>::max());
  if (qs) {
    k.queries = get_strings(*qs, "queries", 1, max_embed_inputs, std::numeric_limits<uint32_t>::max());
    if (k.queries.size() != k.documents.size())
      fail(error_code::invalid_value, "field 'queries' needs one text per document (" + std::to_string(k.documents.size()) +
                                          "), not " + std::to_string(k.queries.size()));
  }
  if (const auto* o = f.find("instruction")) k.instruction = get_string(*o, "instruction", std::numeric_limits<uint32_t>::max());
  get_scheduling(f, r);
  r.n = static_cast<int32_t>(k.documents.size());
  r.stream = false;
  r.max_tokens = 1;
  r.rerank = std::move(k);
  return r;
}

request decode_body(const field_map& f, std::string_view type) {
  if (type == "generate") return decode_generate(f);
  if (type == "embed") return decode_embed(f);
  if (type == "rerank") return decode_rerank(f);
  if (type == "cancel") {
    static constexpr std::string_view allowed[] = {"v", "type", "id"};
    f.check_known(allowed, "a cancel request");
    return cancel_request{get_id(f, true, "cancel")};
  }
  if (type == "tokenize") {
    static constexpr std::string_view allowed[] = {"v", "type", "id", "prompt", "messages", "enable_thinking",
                                                   "add_generation_prompt", "continue_final_message", "tools",
                                                   "chat_template_kwargs", "chat_template"};
    f.check_known(allowed, "a tokenize request");
    tokenize_request r;
    r.id = get_id(f, false, "tokenize");
    get_prompt(f, r, false);
    return r;
  }
  if (type == "health" || type == "models") {
    static constexpr std::string_view allowed[] = {"v", "type", "id"};
    f.check_known(allowed, type == "health" ? "a health request" : "a models request");
    auto id = get_id(f, false, type);
    if (type == "health") return health_request{std::move(id)};
    return models_request{std::move(id)};
  }
  if (type == "set_policy") {
    static constexpr std::string_view allowed[] = {"v", "type", "id", "policy", "config", "token"};
    f.check_known(allowed, "a set_policy request");
    set_policy_request r;
    r.id = get_id(f, false, "set_policy");
    const auto* p = f.find("policy");
    if (!p) fail(error_code::missing_field, "a set_policy request needs field 'policy' (a policy name or a plugin path)");
    r.policy = get_string(*p, "policy", max_policy_bytes);
    if (r.policy.empty()) fail(error_code::invalid_value, "field 'policy' must not be empty");
    if (const auto* o = f.find("config")) r.config = get_string(*o, "config", max_policy_config_bytes);
    if (const auto* o = f.find("token")) r.token = get_string(*o, "token", max_admin_token_bytes);
    return r;
  }
  fail(error_code::unknown_type, "unknown request type '" + std::string(type) +
                                     "'; expected generate, embed, rerank, cancel, tokenize, health, models or set_policy");
}

}  // namespace

decoded_request decode_request(std::string_view payload) {
  decoded_request out;
  std::string id;
  try {
    if (payload.empty()) fail(error_code::malformed, "empty frame: a request is a msgpack map");
    msgpack::object_handle oh;
    size_t off = 0;
    try {
      oh = msgpack::unpack(payload.data(), payload.size(), off, nullptr, nullptr,
                           detail::limits_for(payload.size()));
    } catch (const msgpack::insufficient_bytes&) {
      fail(error_code::malformed, "frame holds a truncated msgpack object");
    } catch (const std::exception& e) {
      fail(error_code::malformed, std::string("frame is not valid msgpack (") + e.what() + ")");
    }
    if (off != payload.size())
      fail(error_code::malformed, std::to_string(payload.size() - off) +
                                      " trailing bytes after the msgpack object");
    const auto& root = oh.get();
    if (root.type != msgpack::type::MAP)
      fail(error_code::malformed, "a request must be a msgpack map; got " +
                                      std::string(type_name(root)));
    field_map f(root, "request");
    // Read the id first (best effort) so that every later error can name the request.
    if (const auto* o = f.find("id"); o && o->type == msgpack::type::STR &&
                                      o->via.str.size <= max_id_bytes && is_valid_utf8(as_view(*o)))
      id = std::string(as_view(*o));
    // The version before anything else: a newer client must hear "version", not "unknown field".
    const auto* v = f.find("v");
    if (!v)
      fail(error_code::missing_field, "missing field 'v' (the protocol version; this server speaks " +
                                          std::to_string(protocol_version) + ")");
    if (v->type != msgpack::type::POSITIVE_INTEGER) wrong_type("v", "an integer", *v);
    if (v->via.u64 != protocol_version)
      fail(error_code::unsupported_version,
           "protocol version " + std::to_string(v->via.u64) +
               " is not supported; this server speaks version " + std::to_string(protocol_version));
    const auto* type = f.find("type");
    if (!type) fail(error_code::missing_field, "missing field 'type' (the request kind)");
    auto type_s = get_string(*type, "type", 64);
    out.req = decode_body(f, type_s);
  } catch (const failure& e) {
    out.req.reset();
    out.error = wire_error{e.code, e.message, id};
  }
  return out;
}

// ---- encoding (clients) -----------------------------------------------------------------------

namespace {

void pack_messages(detail::string_sink& sink, detail::packer& pk, const std::vector<chat_message>& msgs) {
  pk.pack_array(static_cast<uint32_t>(msgs.size()));
  for (const auto& m : msgs) {
    bool r = !m.reasoning_content.empty(), calls = !m.tool_calls_json.empty();
    pk.pack_map(2 + r + calls);
    detail::pack_str(pk, "role");
    detail::pack_str(pk, m.role);
    detail::pack_str(pk, "content");
    detail::pack_str(pk, m.content);
    if (r) {
      detail::pack_str(pk, "reasoning_content");
      detail::pack_str(pk, m.reasoning_content);
    }
    if (calls) {
      detail::pack_str(pk, "tool_calls");
      detail::pack_json_text(sink, m.tool_calls_json);
    }
  }
}

// Packs key/value pairs into a map whose size is only known at the end.
struct map_builder {
  std::string body;
  detail::string_sink sink{&body};
  detail::packer pk{sink};
  uint32_t n = 0;
  detail::packer& key(std::string_view k) {
    ++n;
    detail::pack_str(pk, k);
    return pk;
  }
  void f64(std::string_view k, double v) {
    key(k);
    detail::pack_f64(sink, v);
  }
  // An array of strings; left out when empty (the default).
  void strings(std::string_view k, const std::vector<std::string>& v) {
    if (v.empty()) return;
    key(k).pack_array(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) detail::pack_str(pk, s);
  }
  std::string finish() {
    std::string out;
    detail::string_sink s{&out};
    detail::packer head(s);
    head.pack_map(n);
    out += body;
    return out;
  }
};

template <class Req>
void put_prompt(map_builder& m, const Req& r) {
  switch (r.kind) {
    case prompt_kind::text: detail::pack_str(m.key("prompt"), r.prompt); break;
    case prompt_kind::ids:
      if constexpr (requires { r.prompt_ids; }) m.key("prompt_ids").pack(r.prompt_ids);
      break;
    case prompt_kind::messages: pack_messages(m.sink, m.key("messages"), r.messages); break;
  }
  if (r.enable_thinking) m.key("enable_thinking").pack(*r.enable_thinking);
  if (!r.add_generation_prompt) m.key("add_generation_prompt").pack(false);
  if (r.continue_final_message) m.key("continue_final_message").pack(true);
  if (!r.tools_json.empty()) {
    m.key("tools");
    detail::pack_json_text(m.sink, r.tools_json);
  }
  if (!r.template_kwargs_json.empty()) {
    m.key("chat_template_kwargs");
    detail::pack_json_text(m.sink, r.template_kwargs_json);
  }
  if (!r.chat_template.empty()) detail::pack_str(m.key("chat_template"), r.chat_template);
}

// Always as structured_outputs (response_format decodes to the same thing).
void put_structured(map_builder& m, const structured_output& s) {
  using kind = structured_output::kind;
  if (s.k == kind::none) return;
  auto& pk = m.key("structured_outputs");
  pk.pack_map(1);
  switch (s.k) {
    case kind::json_schema:
      detail::pack_str(pk, "json");
      detail::pack_json_text(m.sink, s.spec);
      break;
    case kind::json_object:
      detail::pack_str(pk, "json_object");
      pk.pack(true);
      break;
    case kind::regex:
      detail::pack_str(pk, "regex");
      detail::pack_str(pk, s.spec);
      break;
    case kind::grammar:
      detail::pack_str(pk, "grammar");
      detail::pack_str(pk, s.spec);
      break;
    case kind::choice:
      detail::pack_str(pk, "choice");
      pk.pack_array(static_cast<uint32_t>(s.choices.size()));
      for (const auto& c : s.choices) detail::pack_str(pk, c);
      break;
    case kind::none: break;
  }
}

// The scheduling fields of embed and rerank requests (get_scheduling's), after their own fields.
// (generate packs `adapter` between tenant and deadline_ms: its byte order is fixed by tests.)
void put_scheduling(map_builder& m, const generate_request& g) {
  if (g.priority != 0) m.key("priority").pack(g.priority);
  if (!g.tenant.empty()) detail::pack_str(m.key("tenant"), g.tenant);
  if (g.deadline_ms) m.key("deadline_ms").pack(*g.deadline_ms);
}

}  // namespace

std::string encode_request(const request& req) {
  map_builder m;
  m.key("v").pack(protocol_version);
  detail::pack_str(m.key("type"), request_type(req));
  const auto& id = request_id(req);
  if (!id.empty() || std::holds_alternative<generate_request>(req) ||
      std::holds_alternative<cancel_request>(req))
    detail::pack_str(m.key("id"), id);
  if (const auto* g = std::get_if<generate_request>(&req); g && g->embed) {
    const auto& e = *g->embed;
    if (!e.texts.empty()) {
      if (e.texts.size() == 1) detail::pack_str(m.key("input"), e.texts[0]);
      else m.strings("input", e.texts);
    } else if (e.ids.size() == 1) {
      m.key("input").pack(e.ids[0]);
    } else {
      m.key("input").pack(e.ids);
    }
    if (e.dimensions) m.key("dimensions").pack(*e.dimensions);
    if (!e.normalize) m.key("normalize").pack(false);
    if (e.classify) detail::pack_str(m.key("task"), std::string("classify"));
    if (g->truncate_prompt_tokens) m.key("truncate_prompt_tokens").pack(*g->truncate_prompt_tokens);
    put_scheduling(m, *g);
  } else if (const auto* g = std::get_if<generate_request>(&req); g && g->rerank) {
    const auto& k = *g->rerank;
    // One query (for every document) goes as `query`, one per document as `queries`; a single
    // document's one query decodes back the same either way.
    if (k.queries.size() == 1) detail::pack_str(m.key("query"), k.queries[0]);
    else m.strings("queries", k.queries);
    m.strings("documents", k.documents);
    if (k.instruction) detail::pack_str(m.key("instruction"), *k.instruction);
    put_scheduling(m, *g);
  } else if (const auto* g = std::get_if<generate_request>(&req)) {
    if (g->prompts.empty()) {
      put_prompt(m, *g);
    } else {
      auto& pk = m.key("prompts");
      pk.pack_array(static_cast<uint32_t>(g->prompts.size()));
      for (const auto& p : g->prompts) {
        if (p.kind == prompt_kind::ids) pk.pack(p.ids);
        else detail::pack_str(pk, p.text);
      }
    }
    const auto& s = g->sampling;
    if (s.temperature) m.f64("temperature", *s.temperature);
    if (s.top_p) m.f64("top_p", *s.top_p);
    if (s.top_k) m.key("top_k").pack(*s.top_k);
    if (s.min_p) m.f64("min_p", *s.min_p);
    if (s.repetition_penalty) m.f64("repetition_penalty", *s.repetition_penalty);
    if (s.presence_penalty) m.f64("presence_penalty", *s.presence_penalty);
    if (s.frequency_penalty) m.f64("frequency_penalty", *s.frequency_penalty);
    if (s.seed) m.key("seed").pack(*s.seed);
    if (g->max_tokens) m.key("max_tokens").pack(*g->max_tokens);
    m.strings("stop", g->stop);
    if (g->include_stop_str_in_output) m.key("include_stop_str_in_output").pack(true);
    if (!g->skip_special_tokens) m.key("skip_special_tokens").pack(false);
    if (!g->stop_ids.empty()) m.key("stop_ids").pack(g->stop_ids);
    if (g->ignore_eos) m.key("ignore_eos").pack(true);
    if (g->return_prompt_ids) m.key("return_prompt_ids").pack(true);
    if (!g->stream) m.key("stream").pack(false);
    if (g->priority != 0) m.key("priority").pack(g->priority);
    if (!g->tenant.empty()) detail::pack_str(m.key("tenant"), g->tenant);
    if (!g->adapter.empty()) detail::pack_str(m.key("adapter"), g->adapter);
    if (g->deadline_ms) m.key("deadline_ms").pack(*g->deadline_ms);
    if (g->logprobs) m.key("logprobs").pack(*g->logprobs);
    if (g->separate_reasoning) m.key("separate_reasoning").pack(true);
    if (g->min_tokens) m.key("min_tokens").pack(*g->min_tokens);
    m.strings("bad_words", g->bad_words);
    if (g->prompt_logprobs) m.key("prompt_logprobs").pack(*g->prompt_logprobs);
    if (!g->allowed_token_ids.empty()) m.key("allowed_token_ids").pack(g->allowed_token_ids);
    if (!g->logit_bias.empty()) {
      auto& pk = m.key("logit_bias");
      pk.pack_map(static_cast<uint32_t>(g->logit_bias.size()));
      for (const auto& [id, bias] : g->logit_bias) {
        detail::pack_str(pk, std::to_string(id));
        detail::pack_f64(m.sink, bias);
      }
    }
    put_structured(m, g->structured);
    if (g->n != 1) m.key("n").pack(g->n);
    if (g->truncate_prompt_tokens) m.key("truncate_prompt_tokens").pack(*g->truncate_prompt_tokens);
    if (!g->cache_salt.empty()) detail::pack_str(m.key("cache_salt"), g->cache_salt);
    if (g->truncate_messages) m.key("truncate_messages").pack(true);
    if (g->thinking_token_budget) m.key("thinking_token_budget").pack(*g->thinking_token_budget);
    if (g->use_beam_search) m.key("use_beam_search").pack(true);
    if (g->length_penalty != 1.0) m.f64("length_penalty", g->length_penalty);
  } else if (const auto* t = std::get_if<tokenize_request>(&req)) {
    put_prompt(m, *t);
  } else if (const auto* p = std::get_if<set_policy_request>(&req)) {
    detail::pack_str(m.key("policy"), p->policy);
    if (!p->config.empty()) detail::pack_str(m.key("config"), p->config);
    if (!p->token.empty()) detail::pack_str(m.key("token"), p->token);
  }
  return m.finish();
}

const std::string& request_id(const request& r) noexcept {
  return std::visit([](const auto& x) -> const std::string& { return x.id; }, r);
}

std::string_view request_type(const request& r) noexcept {
  static constexpr std::string_view names[] = {"generate", "cancel", "tokenize", "health", "models", "set_policy"};
  if (const auto* g = std::get_if<generate_request>(&r); g && g->embed) return "embed";
  if (const auto* g = std::get_if<generate_request>(&r); g && g->rerank) return "rerank";
  return names[r.index()];
}

}  // namespace troupe::wire
