// OpenAI's Conversations API store: each conversation (conv_...) keeps its metadata and its items
// (Responses input and output items, each with an id), which a response given `conversation`
// reads ahead of its input and then extends with its input and output. Bounded by bytes as the
// response store is: the least recently used conversations go first. In memory only. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/wire/lru_bytes.hpp"

namespace troupe::wire::openai {

struct conversation {
  std::string id;  // "conv_" and 32 hex digits
  int64_t created_at = 0;
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  nlohmann::ordered_json items = nlohmann::ordered_json::array();  // each an object with a string "id"
  uint64_t next_item = 0;  // the number of the next item made an id here

  // Appends `added` (an array of items), giving each item without an id one of this
  // conversation's ("item_<hex>_<n>"); the items as appended.
  nlohmann::ordered_json append(const nlohmann::ordered_json& added);
  // The conversation object OpenAI answers with (id, object, created_at, metadata).
  nlohmann::ordered_json object_json() const;
};

class conversation_store {
 public:
  explicit conversation_store(size_t max_bytes) : entries_(max_bytes) {}

  enum class status : uint8_t { ok, unknown, too_big };
  // Stores (or replaces) c, then drops the least recently used until the total fits; too_big when
  // c alone is over max_bytes (nothing is kept under c.id then).
  status put(conversation c);
  // Shows conversation `id` to `see` in place, under the lock (a GET of its metadata or of one
  // item copies nothing else), and makes it the most recently used; false when unknown or dropped.
  bool read(const std::string& id, const std::function<void(const conversation&)>& see);
  // Changes conversation `id` in place under the lock (concurrent responses on one conversation
  // each append whole). too_big: the change would make it larger than max_bytes; it is not made.
  status update(const std::string& id, const std::function<void(conversation&)>& change);
  bool erase(const std::string& id);  // false when unknown

  size_t bytes() const;
  size_t size() const;
  size_t max_bytes() const noexcept { return entries_.max_bytes(); }

 private:
  static size_t cost(const conversation& c);
  mutable std::mutex mu_;
  lru_bytes<conversation> entries_;
};

}  // namespace troupe::wire::openai
