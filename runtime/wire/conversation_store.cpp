#include "runtime/wire/conversation_store.hpp"

namespace troupe::wire::openai {

using ojson = nlohmann::ordered_json;

ojson conversation::append(const ojson& added) {
  ojson out = ojson::array();
  const std::string hex = id.substr(id.find('_') + 1);
  for (ojson it : added) {
    if (!it.contains("id") || !it["id"].is_string()) it["id"] = "item_" + hex + "_" + std::to_string(next_item++);
    items.push_back(it);
    out.push_back(std::move(it));
  }
  return out;
}

ojson conversation::object_json() const {
  return {{"id", id}, {"object", "conversation"}, {"created_at", created_at}, {"metadata", metadata}};
}

// What a conversation costs: its items and metadata as JSON text and its id twice (as the
// response store counts: the bound is on what clients sent and got).
size_t conversation_store::cost(const conversation& c) {
  const auto text = [](const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace).size(); };
  return text(c.items) + text(c.metadata) + 2 * c.id.size();
}

conversation_store::status conversation_store::put(conversation c) {
  const size_t bytes = cost(c);
  std::string id = c.id;
  std::lock_guard lock(mu_);
  return entries_.put(id, std::move(c), bytes) ? status::ok : status::too_big;
}

bool conversation_store::read(const std::string& id, const std::function<void(const conversation&)>& see) {
  std::lock_guard lock(mu_);
  const conversation* c = entries_.get(id);
  if (c) see(*c);
  return c != nullptr;
}

conversation_store::status conversation_store::update(const std::string& id, const std::function<void(conversation&)>& change) {
  std::lock_guard lock(mu_);
  const conversation* now = entries_.get(id);
  if (!now) return status::unknown;
  conversation c = *now;
  change(c);
  const size_t bytes = cost(c);
  if (bytes > entries_.max_bytes()) return status::too_big;  // checked first: the old one stays
  entries_.put(id, std::move(c), bytes);
  return status::ok;
}

bool conversation_store::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  return entries_.erase(id);
}

size_t conversation_store::bytes() const {
  std::lock_guard lock(mu_);
  return entries_.bytes();
}

size_t conversation_store::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace troupe::wire::openai
