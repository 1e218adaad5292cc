// The LoRA adapters a server holds, by name and executor slot, loaded at start-up (--lora) and,
// with [server] allow_runtime_lora_updating, while it runs (vLLM's /v1/load_lora_adapter and
// /v1/unload_lora_adapter). Thread-safe: the gateway and the tokenizer workers look names up, the
// loader adds, the scheduler retires.
//
// A slot is never reused: a new adapter gets a new slot, so no request can meet another adapter
// in the slot it was built for. Unloading hides the name at once (new requests are refused) and
// bumps nothing else; the scheduler refuses a request whose slot was retired after the request
// was built, and frees the slot's weights once no sequence of it is left (draining).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/lora/lora_adapter.hpp"

namespace troupe::serve {

class adapter_registry {
 public:
  struct entry {
    std::string name, identity;  // identity: lora_adapter::identity (the prefix cache's key part)
    int32_t slot = -1;
  };

  // The start-up adapters, in slots 0, 1, ...
  explicit adapter_registry(std::vector<std::shared_ptr<const lora_adapter>> initial = {});

  std::optional<entry> find(std::string_view name) const;  // a live adapter
  std::vector<std::string> names() const;                  // the live ones, by slot
  std::vector<entry> live() const;
  // Every slot's adapter for an executor being made: live, reserved and draining ones (what a
  // sequence may still name); null where freed.
  std::vector<std::shared_ptr<const lora_adapter>> slots() const;
  bool is_live(int32_t slot) const;  // false: reserved, retired or freed

  // Runtime loading: a new slot for `a`, not yet visible to find(); throws troupe::error
  // (invalid_argument) if its name is taken. Then publish() once the executor holds it, or
  // release() if it could not take it.
  int32_t reserve(std::shared_ptr<const lora_adapter> a);
  void publish(int32_t slot);
  void release(int32_t slot);
  // Unloading: hides the name; its slot drains. The slot, or nothing when no live adapter has
  // that name.
  std::optional<int32_t> retire(std::string_view name);
  std::vector<int32_t> draining() const;
  void free(int32_t slot);  // drained: its weights go

  size_t size() const;  // slots ever made

 private:
  enum class state : uint8_t { reserved, live, draining, freed };
  struct slot_info {
    std::shared_ptr<const lora_adapter> adapter;
    state s = state::live;
  };
  void free_from(int32_t slot, state from);  // `slot` freed (weights gone) if it is in state `from`
  mutable std::mutex mu_;
  std::vector<slot_info> slots_;
};

}  // namespace troupe::serve
