#include "runtime/wire/event_codec.hpp"

#include "runtime/wire/frame.hpp"
#include "runtime/wire/msgpack_util.hpp"

namespace troupe::wire {

namespace {

using detail::pack_str;
using detail::packer;

void pack_error_body(packer& pk, const wire_error& e) {
  pack_str(pk, "code");
  pack_str(pk, to_string(e.code));
  pack_str(pk, "message");
  pack_str(pk, e.message);
}

void pack_header(packer& pk, uint32_t num_fields, std::string_view event, const std::string& id) {
  pk.pack_map(num_fields);
  pack_str(pk, "v");
  pk.pack(protocol_version);
  pack_str(pk, "event");
  pack_str(pk, event);
  pack_str(pk, "id");
  if (id.empty() && event == "error")
    pk.pack_nil();  // an error about a request whose id could not be read
  else
    pack_str(pk, id);
}

struct event_packer {
  packer& pk;
  detail::string_sink& sink;
  // {"logprob": f64, "top": [[id, f64], ...]}, a prompt token's with "id" and "rank"
  void logprobs(const logprob_info& l) {
    pk.pack_map(2 + (l.id ? 1 : 0) + (l.rank ? 1 : 0));
    if (l.id) {
      pack_str(pk, "id");
      pk.pack(*l.id);
    }
    if (l.rank) {
      pack_str(pk, "rank");
      pk.pack(*l.rank);
    }
    pack_str(pk, "logprob");
    detail::pack_f64(sink, l.logprob);
    pack_str(pk, "top");
    pk.pack_array(static_cast<uint32_t>(l.top.size()));
    for (const auto& [id, lp] : l.top) {
      pk.pack_array(2);
      pk.pack(id);
      detail::pack_f64(sink, lp);
    }
  }
  void operator()(const token_event& e) {
    pack_header(pk, 5 + (e.reasoning ? 1 : 0) + (e.logprobs ? 1 : 0) + (e.index ? 1 : 0) + (e.prompt_tokens ? 1 : 0) +
                        (e.prompt_ids ? 1 : 0),
                "token", e.id);
    if (e.index) {
      pack_str(pk, "index");
      pk.pack(*e.index);
    }
    if (e.prompt_ids) {
      pack_str(pk, "prompt_ids");
      pk.pack(*e.prompt_ids);
    }
    if (e.prompt_tokens) {
      pack_str(pk, "prompt_tokens");
      pk.pack(*e.prompt_tokens);
    }
    pack_str(pk, "text");
    pack_str(pk, e.text);
    if (e.reasoning) {
      pack_str(pk, "reasoning");
      pack_str(pk, *e.reasoning);
    }
    pack_str(pk, "ids");
    pk.pack(e.ids);
    if (e.logprobs) {
      pack_str(pk, "logprobs");
      logprobs(*e.logprobs);
    }
  }
  void operator()(const done_event& e) {
    uint32_t n = 6 + (e.has_output ? 2 + (e.reasoning ? 1 : 0) : 0) + (e.error ? 1 : 0) + (e.tool_calls.empty() ? 0 : 1) +
                 (e.logprobs.empty() ? 0 : 1) + (e.prompt_logprobs ? 1 : 0) + (e.index ? 1 : 0) +
                 (e.embedding ? 1 : 0) + (e.score ? 1 : 0) + (e.probs ? 1 : 0) + (e.label ? 1 : 0) +
                 (e.prompt_ids ? 1 : 0);
    pack_header(pk, n, "done", e.id);
    if (e.prompt_ids) {
      pack_str(pk, "prompt_ids");
      pk.pack(*e.prompt_ids);
    }
    if (e.index) {
      pack_str(pk, "index");
      pk.pack(*e.index);
    }
    pack_str(pk, "finish_reason");
    pack_str(pk, to_string(e.reason));
    pack_str(pk, "usage");
    pk.pack_map(3);
    pack_str(pk, "prompt_tokens");
    pk.pack(e.usage.prompt_tokens);
    pack_str(pk, "cached_prompt_tokens");
    pk.pack(e.usage.cached_prompt_tokens);
    pack_str(pk, "completion_tokens");
    pk.pack(e.usage.completion_tokens);
    pack_str(pk, "timings");
    pk.pack_map(3);
    pack_str(pk, "queue_ms");
    detail::pack_f64(sink, e.timings.queue_ms);
    pack_str(pk, "ttft_ms");
    detail::pack_f64(sink, e.timings.ttft_ms);
    pack_str(pk, "total_ms");
    detail::pack_f64(sink, e.timings.total_ms);
    if (e.has_output) {
      pack_str(pk, "text");
      pack_str(pk, e.text);
      if (e.reasoning) {
        pack_str(pk, "reasoning");
        pack_str(pk, *e.reasoning);
      }
      pack_str(pk, "ids");
      pk.pack(e.ids);
    }
    if (!e.logprobs.empty()) {
      pack_str(pk, "logprobs");
      pk.pack_array(static_cast<uint32_t>(e.logprobs.size()));
      for (const auto& l : e.logprobs) logprobs(l);
    }
    if (e.prompt_logprobs) {
      pack_str(pk, "prompt_logprobs");
      pk.pack_array(static_cast<uint32_t>(e.prompt_logprobs->size() + 1));
      pk.pack_nil();  // the first prompt token: nothing before it to predict it
      for (const auto& l : *e.prompt_logprobs) logprobs(l);
    }
    if (e.score) {
      pack_str(pk, "score");
      detail::pack_f64(sink, *e.score);
    }
    for (const auto& [name, values] : {std::pair{"embedding", &e.embedding}, std::pair{"probs", &e.probs}})
      if (*values) {  // float32 values, as the engine computes them
        pack_str(pk, name);
        pk.pack_array(static_cast<uint32_t>((*values)->size()));
        for (float v : **values) pk.pack_float(v);
      }
    if (e.label) {
      pack_str(pk, "label");
      pack_str(pk, *e.label);
    }
    if (!e.tool_calls.empty()) {
      pack_str(pk, "tool_calls");
      pk.pack_array(static_cast<uint32_t>(e.tool_calls.size()));
      for (const auto& c : e.tool_calls) {
        pk.pack_map(2);
        pack_str(pk, "name");
        pack_str(pk, c.name);
        pack_str(pk, "arguments");
        pack_str(pk, c.arguments);
      }
    }
    if (e.error) {
      pack_str(pk, "error");
      pk.pack_map(2);
      pack_error_body(pk, *e.error);
    }
  }
  void operator()(const wire_error& e) {
    pack_header(pk, 5, "error", e.id);
    pack_error_body(pk, e);
  }
  void operator()(const tokenize_event& e) {
    pack_header(pk, 4, "tokenize", e.id);
    pack_str(pk, "ids");
    pk.pack(e.ids);
  }
  void operator()(const health_event& e) {
    pack_header(pk, 6, "health", e.id);
    pack_str(pk, "status");
    pack_str(pk, e.status);
    pack_str(pk, "running");
    pk.pack(e.running);
    pack_str(pk, "waiting");
    pk.pack(e.waiting);
  }
  void operator()(const models_event& e) {
    pack_header(pk, 4, "models", e.id);
    pack_str(pk, "models");
    pk.pack_array(static_cast<uint32_t>(e.models.size()));
    for (const auto& m : e.models) {
      pk.pack_map(m.parent.empty() ? 3 : 4);
      pack_str(pk, "name");
      pack_str(pk, m.name);
      pack_str(pk, "max_model_len");
      pk.pack(m.max_model_len);
      pack_str(pk, "vocab_size");
      pk.pack(m.vocab_size);
      if (!m.parent.empty()) {
        pack_str(pk, "parent");
        pack_str(pk, m.parent);
      }
    }
  }
  void operator()(const policy_event& e) {
    pack_header(pk, 5, "policy", e.id);
    pack_str(pk, "policy");
    pack_str(pk, e.policy);
    pack_str(pk, "previous");
    pack_str(pk, e.previous);
  }
};

}  // namespace

std::string encode_event(const event& e) {
  std::string out;
  detail::string_sink sink{&out};
  packer pk(sink);
  std::visit(event_packer{pk, sink}, e);
  return out;
}

void append_event_frame(std::string& out, const event& e) {
  size_t at = out.size();
  append_frame_header(out, 0);
  detail::string_sink sink{&out};
  packer pk(sink);
  std::visit(event_packer{pk, sink}, e);
  auto n = static_cast<uint32_t>(out.size() - at - frame_header_bytes);
  out[at] = static_cast<char>(n >> 24);
  out[at + 1] = static_cast<char>(n >> 16);
  out[at + 2] = static_cast<char>(n >> 8);
  out[at + 3] = static_cast<char>(n);
}

// ---- decoding (clients) -----------------------------------------------------------------------

namespace {

struct bad_event {
  std::string why;
};

class reader {
 public:
  explicit reader(const msgpack::object& map) : map_(map) {
    if (map.type != msgpack::type::MAP) throw bad_event{"an event must be a map"};
  }
  const msgpack::object* find(std::string_view name) const {
    for (uint32_t i = 0; i < map_.via.map.size; ++i) {
      const auto& kv = map_.via.map.ptr[i];
      if (kv.key.type == msgpack::type::STR && detail::as_view(kv.key) == name) return &kv.val;
    }
    return nullptr;
  }
  const msgpack::object& need(std::string_view name) const {
    const auto* o = find(name);
    if (!o) throw bad_event{"missing field '" + std::string(name) + "'"};
    return *o;
  }
  std::string str(std::string_view name) const {
    const auto& o = need(name);
    if (o.type != msgpack::type::STR) throw bad_event{"field '" + std::string(name) + "' is not a string"};
    return std::string(detail::as_view(o));
  }
  int64_t integer(std::string_view name) const {
    const auto& o = need(name);
    if (o.type == msgpack::type::POSITIVE_INTEGER) return static_cast<int64_t>(o.via.u64);
    if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
    throw bad_event{"field '" + std::string(name) + "' is not an integer"};
  }
  double number(std::string_view name) const {
    const auto& o = need(name);
    if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64) return o.via.f64;
    return static_cast<double>(integer(name));
  }
  std::vector<int32_t> ids(std::string_view name) const {
    const auto& o = need(name);
    try {
      return o.as<std::vector<int32_t>>();
    } catch (const std::exception&) {
      throw bad_event{"field '" + std::string(name) + "' is not an array of integers"};
    }
  }

 private:
  const msgpack::object& map_;
};

logprob_info read_logprobs(const reader& r) {
  logprob_info l;
  l.logprob = r.number("logprob");
  if (r.find("id")) l.id = static_cast<int32_t>(r.integer("id"));
  if (r.find("rank")) l.rank = static_cast<int32_t>(r.integer("rank"));
  const auto& top = r.need("top");
  if (top.type != msgpack::type::ARRAY) throw bad_event{"field 'top' is not an array"};
  for (uint32_t i = 0; i < top.via.array.size; ++i) {
    const auto& p = top.via.array.ptr[i];
    if (p.type != msgpack::type::ARRAY || p.via.array.size != 2 || p.via.array.ptr[0].type != msgpack::type::POSITIVE_INTEGER ||
        (p.via.array.ptr[1].type != msgpack::type::FLOAT64 && p.via.array.ptr[1].type != msgpack::type::FLOAT32))
      throw bad_event{"field 'top' holds something other than [id, logprob] pairs"};
    l.top.emplace_back(static_cast<int32_t>(p.via.array.ptr[0].via.u64), p.via.array.ptr[1].via.f64);
  }
  return l;
}

wire_error read_error(const reader& r, std::string id) {
  auto code = parse_error_code(r.str("code"));
  if (!code) throw bad_event{"unknown error code '" + r.str("code") + "'"};
  return wire_error{*code, r.str("message"), std::move(id)};
}

event decode_body(const reader& r) {
  auto kind = r.str("event");
  std::string id;
  if (const auto* o = r.find("id"); o && o->type == msgpack::type::STR) id = std::string(detail::as_view(*o));
  if (kind == "token") {
    token_event t{id, r.str("text"), r.ids("ids"), std::nullopt, std::nullopt, std::nullopt, std::nullopt};
    if (const auto* l = r.find("logprobs")) t.logprobs = read_logprobs(reader(*l));
    if (r.find("index")) t.index = static_cast<int32_t>(r.integer("index"));
    if (r.find("reasoning")) t.reasoning = r.str("reasoning");
    if (r.find("prompt_tokens")) t.prompt_tokens = r.integer("prompt_tokens");
    if (r.find("prompt_ids")) t.prompt_ids = r.ids("prompt_ids");
    return t;
  }
  if (kind == "done") {
    done_event d;
    d.id = id;
    auto reason = parse_finish_reason(r.str("finish_reason"));
    if (!reason) throw bad_event{"unknown finish_reason '" + r.str("finish_reason") + "'"};
    d.reason = *reason;
    reader u(r.need("usage"));
    d.usage = {u.integer("prompt_tokens"), u.integer("cached_prompt_tokens"),
               u.integer("completion_tokens")};
    reader t(r.need("timings"));
    d.timings = {t.number("queue_ms"), t.number("ttft_ms"), t.number("total_ms")};
    if (r.find("prompt_ids")) d.prompt_ids = r.ids("prompt_ids");
    if (r.find("text")) {
      d.has_output = true;
      d.text = r.str("text");
      if (r.find("reasoning")) d.reasoning = r.str("reasoning");
      d.ids = r.ids("ids");
    }
    if (const auto* lps = r.find("logprobs")) {
      if (lps->type != msgpack::type::ARRAY) throw bad_event{"field 'logprobs' is not an array"};
      for (uint32_t i = 0; i < lps->via.array.size; ++i) d.logprobs.push_back(read_logprobs(reader(lps->via.array.ptr[i])));
    }
    if (const auto* lps = r.find("prompt_logprobs")) {
      if (lps->type != msgpack::type::ARRAY || lps->via.array.size == 0 || lps->via.array.ptr[0].type != msgpack::type::NIL)
        throw bad_event{"field 'prompt_logprobs' is not an array starting with nil"};
      d.prompt_logprobs.emplace();
      for (uint32_t i = 1; i < lps->via.array.size; ++i) d.prompt_logprobs->push_back(read_logprobs(reader(lps->via.array.ptr[i])));
    }
    if (const auto* calls = r.find("tool_calls")) {
      if (calls->type != msgpack::type::ARRAY) throw bad_event{"field 'tool_calls' is not an array"};
      for (uint32_t i = 0; i < calls->via.array.size; ++i) {
        reader c(calls->via.array.ptr[i]);
        d.tool_calls.push_back({c.str("name"), c.str("arguments")});
      }
    }
    for (const auto& [name, values] : {std::pair{"embedding", &d.embedding}, std::pair{"probs", &d.probs}}) {
      const auto* arr = r.find(name);
      if (!arr) continue;
      if (arr->type != msgpack::type::ARRAY) throw bad_event{std::string("field '") + name + "' is not an array"};
      values->emplace();
      // msgpack-cxx packs a float with an integer value (0, 1) as an integer.
      for (uint32_t i = 0; i < arr->via.array.size; ++i) {
        const auto& v = arr->via.array.ptr[i];
        if (v.type == msgpack::type::FLOAT32 || v.type == msgpack::type::FLOAT64)
          (*values)->push_back(static_cast<float>(v.via.f64));
        else if (v.type == msgpack::type::POSITIVE_INTEGER)
          (*values)->push_back(static_cast<float>(v.via.u64));
        else if (v.type == msgpack::type::NEGATIVE_INTEGER)
          (*values)->push_back(static_cast<float>(v.via.i64));
        else
          throw bad_event{std::string("field '") + name + "' holds a value that is not a number"};
      }
    }
    if (r.find("label")) d.label = r.str("label");
    if (r.find("score")) d.score = r.number("score");
    if (const auto* e = r.find("error")) d.error = read_error(reader(*e), id);
    if (r.find("index")) d.index = static_cast<int32_t>(r.integer("index"));
    return d;
  }
  if (kind == "error") return read_error(r, id);
  if (kind == "tokenize") return tokenize_event{id, r.ids("ids")};
  if (kind == "health") return health_event{id, r.str("status"), r.integer("running"), r.integer("waiting")};
  if (kind == "models") {
    models_event m{id, {}};
    const auto& a = r.need("models");
    if (a.type != msgpack::type::ARRAY) throw bad_event{"field 'models' is not an array"};
    for (uint32_t i = 0; i < a.via.array.size; ++i) {
      reader e(a.via.array.ptr[i]);
      m.models.push_back({e.str("name"), e.integer("max_model_len"), e.integer("vocab_size"),
                          e.find("parent") ? e.str("parent") : std::string()});
    }
    return m;
  }
  if (kind == "policy") return policy_event{id, r.str("policy"), r.str("previous")};
  throw bad_event{"unknown event '" + kind + "'"};
}

}  // namespace

decoded_event decode_event(std::string_view payload) {
  decoded_event out;
  try {
    size_t off = 0;
    auto oh = msgpack::unpack(payload.data(), payload.size(), off, nullptr, nullptr,
                              detail::limits_for(payload.size()));
    if (off != payload.size()) throw bad_event{"trailing bytes after the event"};
    out.ev = decode_body(reader(oh.get()));
  } catch (const bad_event& e) {
    out.error = e.why;
  } catch (const std::exception& e) {
    out.error = std::string("not valid msgpack (") + e.what() + ")";
  }
  return out;
}

}  // namespace troupe::wire
