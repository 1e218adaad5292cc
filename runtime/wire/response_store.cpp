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
  entry e;
  e.num_input = std::min(num_input, items.size());
  e.items = std::make_shared<const nlohmann::ordered_json>(std::move(items));
  e.response = std::make_shared<const std::string>(std::move(response));
  e.events = std::move(events);
  e.finished = finished;
  std::lock_guard lock(mu_);
  return entries_.put(id, std::move(e), bytes);
}

std::optional<response_store::entry> response_store::get(const std::string& id) {
  std::lock_guard lock(mu_);
  const entry* e = entries_.get(id);
  return e ? std::optional<entry>(*e) : std::nullopt;
}

bool response_store::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  return entries_.erase(id);
}

size_t response_store::bytes() const {
  std::lock_guard lock(mu_);
  return entries_.bytes();
}

size_t response_store::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace troupe::wire::openai
