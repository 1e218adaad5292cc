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
  if (bytes > max_bytes_) return status::too_big;
  std::lock_guard lock(mu_);
  if (auto it = map_.find(c.id); it != map_.end()) drop(it);
  lru_.push_front(c.id);
  slot s;
  s.bytes = bytes;
  s.lru = lru_.begin();
  std::string id = c.id;
  s.c = std::move(c);
  map_.emplace(std::move(id), std::move(s));
  bytes_ += bytes;
  fit();
  return status::ok;
}

std::optional<conversation> conversation_store::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.c;
}

conversation_store::status conversation_store::update(const std::string& id, const std::function<void(conversation&)>& change) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return status::unknown;
  conversation c = it->second.c;
  change(c);
  const size_t bytes = cost(c);
  if (bytes > max_bytes_) return status::too_big;
  bytes_ = bytes_ - it->second.bytes + bytes;
  it->second.c = std::move(c);
  it->second.bytes = bytes;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  fit();
  return status::ok;
}

bool conversation_store::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return false;
  drop(it);
  return true;
}

void conversation_store::drop(std::unordered_map<std::string, slot>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void conversation_store::fit() {
  while (bytes_ > max_bytes_) drop(map_.find(lru_.back()));  // the one just used is the front: it stays
}

size_t conversation_store::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t conversation_store::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace troupe::wire::openai
