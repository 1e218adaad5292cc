#include "runtime/grammar/matcher.hpp"

#include <algorithm>
#include <limits>

#include "runtime/core/error.hpp"

namespace troupe::grammar {

struct matcher::impl {
  std::shared_ptr<automaton> a;
  std::vector<int32_t> end_ids;
  int32_t current = automaton::dead;
  bool finished = false;
  std::shared_ptr<const std::vector<uint64_t>> held;  // the mask last handed out
  std::vector<uint64_t> with_ends;                     // allowed_mask(): held plus end ids

  // A full automaton is left to the matchers still in it: this one carries on in a fresh one.
  void move_if_full() {
    if (!a->full()) return;
    auto fresh = std::make_shared<automaton>(a->grammar_ptr(), a->tokens(), a->max_states());
    current = fresh->adopt(*a, current);
    a = std::move(fresh);
  }

  bool is_end_id(int32_t id) const { return std::find(end_ids.begin(), end_ids.end(), id) != end_ids.end(); }
};

matcher::matcher(std::shared_ptr<automaton> a, std::vector<int32_t> end_ids) : impl_(std::make_unique<impl>()) {
  TROUPE_ASSERT(a);
  impl_->a = std::move(a);
  impl_->end_ids = std::move(end_ids);
  impl_->current = impl_->a->start();
}

matcher::matcher(std::shared_ptr<const grammar> g, std::shared_ptr<const token_table> tokens,
                 std::vector<int32_t> end_ids)
    : matcher(std::make_shared<automaton>(std::move(g), std::move(tokens)), std::move(end_ids)) {}

matcher::~matcher() = default;
matcher::matcher(matcher&&) noexcept = default;
matcher& matcher::operator=(matcher&&) noexcept = default;

bool matcher::accept_bytes(std::string_view bytes) {
  if (impl_->finished) return bytes.empty();
  impl_->move_if_full();
  const int32_t to = impl_->a->walk(impl_->current, bytes);
  if (to == automaton::dead) return false;
  impl_->current = to;
  return true;
}

bool matcher::can_accept(std::string_view bytes) {
  if (impl_->finished) return bytes.empty();
  impl_->move_if_full();
  return impl_->a->walk(impl_->current, bytes) != automaton::dead;
}

bool matcher::accept_token(int32_t id) {
  if (impl_->finished || id < 0) return false;
  const auto& tokens = *impl_->a->tokens();
  if (static_cast<size_t>(id) < tokens.id_limit()) {
    const std::string_view bytes = tokens.bytes(id);
    if (!bytes.empty() && accept_bytes(bytes)) return true;
  }
  if (impl_->is_end_id(id) && is_complete()) {
    impl_->finished = true;
    return true;
  }
  return false;
}

bool matcher::is_complete() const { return impl_->a->complete(impl_->current); }

bool matcher::is_finished() const noexcept { return impl_->finished; }

std::span<const uint64_t> matcher::allowed_mask() {
  const size_t words = (impl_->a->tokens()->id_limit() + 63) / 64;
  if (impl_->finished) {
    impl_->with_ends.assign(words, 0);
    return impl_->with_ends;
  }
  impl_->move_if_full();
  impl_->held = impl_->a->mask(impl_->current);
  impl_->with_ends = *impl_->held;
  if (is_complete())
    for (int32_t id : impl_->end_ids)
      if (id >= 0 && static_cast<size_t>(id) / 64 < words) impl_->with_ends[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  return impl_->with_ends;
}

void matcher::mask_logits(std::span<float> logits) {
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  if (impl_->finished) {
    std::fill(logits.begin(), logits.end(), neg_inf);
    return;
  }
  impl_->move_if_full();
  impl_->held = impl_->a->mask(impl_->current);
  const std::vector<uint64_t>& bits = *impl_->held;
  // End ids have no bytes, so the automaton's mask excludes them: keep their logits to put back.
  const bool complete = is_complete();
  thread_local std::vector<std::pair<size_t, float>> ends;
  ends.clear();
  if (complete)
    for (int32_t id : impl_->end_ids)
      if (id >= 0 && static_cast<size_t>(id) < logits.size()) ends.push_back({static_cast<size_t>(id), logits[static_cast<size_t>(id)]});
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = w < bits.size() ? bits[w] : 0;
    if (word == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    if (word == 0) {  // the common word in a structural state: a plain fill
      std::fill(logits.begin() + static_cast<ptrdiff_t>(w * 64), logits.begin() + static_cast<ptrdiff_t>(end), neg_inf);
      continue;
    }
    for (size_t i = w * 64; i < end; ++i)
      if (!((word >> (i - w * 64)) & 1)) logits[i] = neg_inf;
  }
  for (const auto& [id, l] : ends) logits[id] = l;
}

const std::shared_ptr<automaton>& matcher::shared_automaton() const { return impl_->a; }

size_t matcher::num_states() const { return impl_->a->num_states(); }

}  // namespace troupe::grammar
