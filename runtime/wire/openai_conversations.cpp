#include "runtime/wire/openai_conversations.hpp"

#include "runtime/wire/openai_detail.hpp"
#include "runtime/wire/openai_responses.hpp"

namespace troupe::wire::openai {

using namespace detail;

namespace {

constexpr size_t kMaxItemsAtOnce = 20;    // OpenAI's bound on items per create call
constexpr size_t kMaxMetadataPairs = 16;  // and its metadata's bounds
constexpr size_t kMaxMetadataKey = 64, kMaxMetadataValue = 512;

conversations_answer ok(const ojson& j) { return {200, dump(j)}; }

// The body's one field `key` (required; any other is refused naming it), for `what`.
const ojson& only_field(const ojson& b, const char* key, const char* what) {
  for (const auto& [k, v] : b.items())
    if (k != key) refuse("unknown_field", k, "unknown field '" + k + "' for " + what + " (it takes " + key + ")");
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) refuse("missing_field", key, std::string(what) + " needs field '" + key + "'");
  return *it;
}

void check_metadata(const ojson& m) {
  want(m, m.is_object(), "metadata", "an object of strings");
  if (m.size() > kMaxMetadataPairs)
    refuse("invalid_value", "metadata", "field 'metadata' has " + std::to_string(m.size()) + " keys; at most 16");
  for (const auto& [k, v] : m.items()) {
    if (k.size() > kMaxMetadataKey)
      refuse("invalid_value", "metadata", "a metadata key has " + std::to_string(k.size()) + " characters; at most 64");
    want(v, v.is_string(), "metadata." + k, "a string");
    if (v.get_ref<const std::string&>().size() > kMaxMetadataValue)
      refuse("invalid_value", "metadata." + k, "field 'metadata." + k + "' is longer than 512 characters");
  }
}

// `items` of a create call: 1..20 valid input items (0 allowed where `may_be_empty`).
void check_items(const ojson& items, bool may_be_empty) {
  check_input_items(items, "items");
  if (items.size() > kMaxItemsAtOnce || (!may_be_empty && items.empty()))
    refuse("invalid_value", "items",
           "field 'items' has " + std::to_string(items.size()) + " items; expected " + (may_be_empty ? "0" : "1") +
               " to 20 at a time");
}

[[noreturn]] void too_big(conversation_store& store) {
  refuse("invalid_value", "items",
         "the conversation would be larger than the server keeps (server.conversations_store_bytes = " +
             std::to_string(store.max_bytes()) + ")");
}

[[noreturn]] void no_conversation(const std::string& id) {
  refuse("not_found", "conversation_id",
         "no conversation '" + id + "' is kept here (never made, deleted, or dropped to keep the store within "
                                    "server.conversations_store_bytes)",
         404);
}

[[noreturn]] void wrong_method(const conversations_call& call, const char* allowed) {
  refuse("method_not_allowed", "", "use " + std::string(allowed) + " for /v1/conversations" + std::string(call.rest), 405);
}

conversations_answer create(conversation_store& store, const conversations_call& call) {
  const ojson b = call.body.empty() ? ojson::object() : parse_body(call.body);
  conversation c;
  c.id = call.new_id;
  c.created_at = call.now;
  ojson items = ojson::array();
  for (const auto& [k, v] : b.items()) {
    if (v.is_null()) continue;
    if (k == "metadata") {
      check_metadata(v);
      c.metadata = v;
    } else if (k == "items") {
      check_items(v, true);
      items = v;
    } else {
      refuse("unknown_field", k, "unknown field '" + k + "' for a conversation (it takes items and metadata)");
    }
  }
  c.append(items);
  ojson answer = c.object_json();
  if (store.put(std::move(c)) != conversation_store::status::ok) too_big(store);
  return ok(answer);
}

conversations_answer one_conversation(conversation_store& store, const conversations_call& call, const std::string& id) {
  if (call.method == "GET") {
    ojson answer;
    if (!store.read(id, [&](const conversation& c) { answer = c.object_json(); })) no_conversation(id);
    return ok(answer);
  }
  if (call.method == "DELETE") {
    if (!store.erase(id)) no_conversation(id);
    return ok({{"id", id}, {"object", "conversation.deleted"}, {"deleted", true}});
  }
  if (call.method != "POST") wrong_method(call, "GET, POST or DELETE");
  const ojson b = parse_body(call.body);
  const ojson& m = only_field(b, "metadata", "a conversation's update");
  check_metadata(m);
  ojson answer;
  const auto s = store.update(id, [&](conversation& c) {
    c.metadata = m;
    answer = c.object_json();
  });
  if (s == conversation_store::status::unknown) no_conversation(id);
  if (s == conversation_store::status::too_big) too_big(store);
  return ok(answer);
}

conversations_answer items(conversation_store& store, const conversations_call& call, const std::string& id) {
  if (call.method == "GET") {
    ojson listed = ojson::array();
    if (!store.read(id, [&](const conversation& c) {
          for (const auto& it : c.items) listed.push_back(listed_item(it));
        }))
      no_conversation(id);
    auto page = list_page(std::move(listed), "conversation '" + id + "'", call.order, call.limit, call.after);
    return {page.status, std::move(page.body)};
  }
  if (call.method != "POST") wrong_method(call, "GET or POST");
  const ojson b = parse_body(call.body);
  const ojson& added = only_field(b, "items", "adding items");
  check_items(added, false);
  ojson appended;
  const auto s = store.update(id, [&](conversation& c) { appended = c.append(added); });
  if (s == conversation_store::status::unknown) no_conversation(id);
  if (s == conversation_store::status::too_big) too_big(store);
  ojson data = ojson::array();
  for (const auto& it : appended) data.push_back(listed_item(it));
  return ok({{"object", "list"},
             {"data", data},
             {"first_id", data.front()["id"]},
             {"last_id", data.back()["id"]},
             {"has_more", false}});
}

conversations_answer one_item(conversation_store& store, const conversations_call& call, const std::string& id,
                              const std::string& item) {
  auto no_item = [&] {
    refuse("not_found", "item_id", "conversation '" + id + "' has no item '" + item + "'", 404);
  };
  if (call.method == "GET") {
    std::optional<ojson> found;
    if (!store.read(id, [&](const conversation& c) {
          for (const auto& it : c.items)
            if (it.value("id", std::string()) == item) {
              found = listed_item(it);
              break;
            }
        }))
      no_conversation(id);
    if (!found) no_item();
    return ok(std::move(*found));
  }
  if (call.method != "DELETE") wrong_method(call, "GET or DELETE");
  bool found = false;
  ojson answer;
  const auto s = store.update(id, [&](conversation& c) {
    ojson kept = ojson::array();
    for (auto& it : c.items) {
      if (it["id"] == item) found = true;
      else kept.push_back(std::move(it));
    }
    c.items = std::move(kept);
    answer = c.object_json();
  });
  if (s == conversation_store::status::unknown) no_conversation(id);
  if (!found) no_item();
  return ok(answer);
}

}  // namespace

conversations_answer serve_conversations(conversation_store& store, const conversations_call& call) {
  try {
    std::string_view rest = call.rest;
    if (rest.empty() || rest == "/") {
      if (call.method != "POST") wrong_method(call, "POST");
      return create(store, call);
    }
    rest.remove_prefix(1);
    const auto slash = rest.find('/');
    const std::string id(rest.substr(0, slash));
    if (id.empty()) refuse("not_found", "", "no endpoint /v1/conversations" + std::string(call.rest), 404);
    if (slash == std::string_view::npos) return one_conversation(store, call, id);
    std::string_view tail = rest.substr(slash);
    if (tail == "/items") return items(store, call, id);
    if (tail.rfind("/items/", 0) == 0 && tail.size() > 7 && tail.find('/', 7) == std::string_view::npos)
      return one_item(store, call, id, std::string(tail.substr(7)));
    refuse("not_found", "",
           "no endpoint /v1/conversations" + std::string(call.rest) +
               " (served: POST /v1/conversations, GET POST DELETE /v1/conversations/{id}, GET POST "
               "/v1/conversations/{id}/items, GET DELETE /v1/conversations/{id}/items/{item_id})",
           404);
  } catch (const refusal& r) {
    return {r.e.status, error_body(r.e)};
  }
}

}  // namespace troupe::wire::openai
