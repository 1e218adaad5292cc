// The Responses API's store (OpenAI's `store: true`, vLLM's VLLM_ENABLE_RESPONSES_API_STORE): each
// stored response keeps its whole conversation as input items (what `previous_response_id` puts
// ahead of a later request's input: the earlier input, the earlier ones' too, and the response's
// output items) and the response object (what GET /v1/responses/{id} answers). Bounded by bytes:
// the least recently used responses go first, so a server that runs for months holds at most
// max_bytes of them. Lives in memory only: a restart forgets every response. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/wire/lru_bytes.hpp"

namespace troupe::wire::openai {

class response_store {
 public:
  struct entry {
    std::shared_ptr<const nlohmann::ordered_json> items;  // the conversation, as input items
    std::shared_ptr<const std::string> response;          // the response object's JSON text
    size_t num_input = 0;  // items' first num_input are the input it answered, the rest its output
    // A background response's server-sent events, by sequence number (created with background and
    // stream: GET ?stream=true replays them); null otherwise.
    std::shared_ptr<const std::vector<std::string>> events;
    bool finished = true;  // false: a background response still queued or running (its input only)
  };

  explicit response_store(size_t max_bytes) : entries_(max_bytes) {}

  // Stores (or replaces) `id`, then drops the least recently used until the total fits. An entry
  // larger than max_bytes alone is not kept (false; an earlier entry of `id` is gone too).
  bool put(const std::string& id, nlohmann::ordered_json items, std::string response, size_t num_input = SIZE_MAX,
           std::shared_ptr<const std::vector<std::string>> events = nullptr, bool finished = true);
  // The entry, now the most recently used; nothing when unknown or dropped.
  std::optional<entry> get(const std::string& id);
  bool erase(const std::string& id);  // false when unknown

  size_t bytes() const;
  size_t size() const;
  size_t max_bytes() const noexcept { return entries_.max_bytes(); }

 private:
  mutable std::mutex mu_;
  lru_bytes<entry> entries_;
};

}  // namespace troupe::wire::openai
