#include "runtime/serve/adapter_registry.hpp"

#include "runtime/core/error.hpp"

namespace troupe::serve {

adapter_registry::adapter_registry(std::vector<std::shared_ptr<const lora_adapter>> initial) {
  for (auto& a : initial) slots_.push_back({std::move(a), state::live});
}

std::optional<adapter_registry::entry> adapter_registry::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].s == state::live && slots_[i].adapter->name == name)
      return entry{slots_[i].adapter->name, slots_[i].adapter->identity, static_cast<int32_t>(i)};
  return std::nullopt;
}

std::vector<std::string> adapter_registry::names() const {
  std::vector<std::string> out;
  for (auto& e : live()) out.push_back(std::move(e.name));
  return out;
}

std::vector<adapter_registry::entry> adapter_registry::live() const {
  std::lock_guard lock(mu_);
  std::vector<entry> out;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].s == state::live)
      out.push_back({slots_[i].adapter->name, slots_[i].adapter->identity, static_cast<int32_t>(i)});
  return out;
}

std::vector<std::shared_ptr<const lora_adapter>> adapter_registry::slots() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const lora_adapter>> out;
  for (const auto& s : slots_) out.push_back(s.s == state::freed ? nullptr : s.adapter);
  return out;
}

bool adapter_registry::is_live(int32_t slot) const {
  std::lock_guard lock(mu_);
  return slot >= 0 && static_cast<size_t>(slot) < slots_.size() && slots_[static_cast<size_t>(slot)].s == state::live;
}

int32_t adapter_registry::reserve(std::shared_ptr<const lora_adapter> a) {
  std::lock_guard lock(mu_);
  for (const auto& s : slots_)
    if ((s.s == state::live || s.s == state::reserved) && s.adapter->name == a->name)
      throw_error(errc::invalid_argument, "the LoRA adapter '" + a->name + "' is already loaded");
  slots_.push_back({std::move(a), state::reserved});
  return static_cast<int32_t>(slots_.size() - 1);
}

void adapter_registry::publish(int32_t slot) {
  std::lock_guard lock(mu_);
  auto& s = slots_.at(static_cast<size_t>(slot));
  if (s.s == state::reserved) s.s = state::live;
}

void adapter_registry::release(int32_t slot) { free_from(slot, state::reserved); }

std::optional<int32_t> adapter_registry::retire(std::string_view name) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].s == state::live && slots_[i].adapter->name == name) {
      slots_[i].s = state::draining;
      return static_cast<int32_t>(i);
    }
  return std::nullopt;
}

std::vector<int32_t> adapter_registry::draining() const {
  std::lock_guard lock(mu_);
  std::vector<int32_t> out;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].s == state::draining) out.push_back(static_cast<int32_t>(i));
  return out;
}

void adapter_registry::free(int32_t slot) { free_from(slot, state::draining); }

void adapter_registry::free_from(int32_t slot, state from) {
  std::lock_guard lock(mu_);
  auto& s = slots_.at(static_cast<size_t>(slot));
  if (s.s != from) return;
  s.s = state::freed;
  s.adapter.reset();
}

size_t adapter_registry::size() const {
  std::lock_guard lock(mu_);
  return slots_.size();
}

}  // namespace troupe::serve
