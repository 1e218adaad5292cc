#include "runtime/wire/response_store.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace troupe::wire::openai {

bool response_store::put(const std::string& id, nlohmann::ordered_json items, std::string response, size_t num_input,
                         std::shared_ptr<const std::vector<std::string>> events, bool finished) {
  // What an entry costs: its text as JSON (the parsed form takes a few times that; the bound is on
  // what the clients sent and got, which they can reason about), its events' text and its id twice.
  size_t bytes = items.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).size() +
                 response.size() + 2 * id.size();
  if (events)
    for (const auto& e : *events) bytes += e.size();
  std::lock_guard lock(mu_);
  if (auto it = map_.find(id); it != map_.end()) drop(it);
  if (bytes > max_bytes_) return false;
  lru_.push_front(id);
  slot s;
  s.e.num_input = std::min(num_input, items.size());
  s.e.items = std::make_shared<const nlohmann::ordered_json>(std::move(items));
  s.e.response = std::make_shared<const std::string>(std::move(response));
  s.e.events = std::move(events);
  s.e.finished = finished;
  s.bytes = bytes;
  s.lru = lru_.begin();
  map_.emplace(id, std::move(s));
  bytes_ += bytes;
  while (bytes_ > max_bytes_) drop(map_.find(lru_.back()));
  return true;
}

std::optional<response_store::entry> response_store::get(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.e;
}

bool response_store::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return false;
  drop(it);
  return true;
}

void response_store::drop(std::unordered_map<std::string, slot>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  map_.erase(it);
}

size_t response_store::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t response_store::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace troupe::wire::openai
