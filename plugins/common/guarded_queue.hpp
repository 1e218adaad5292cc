// The waiting queue of a policy that orders by its own key and guards against starvation:
// requests that have waited max_wait_ns or longer are ranked first, oldest first, then the rest
// by key (ties by arrival). Two sorted trees, so an event is O(log n) and a ranking O(cap).
#pragma once

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace troupe_policy_kit {

template <class Key>  // a strict weak order (operator<)
class guarded_queue {
 public:
  explicit guarded_queue(int64_t max_wait_ns) : max_wait_ns_(max_wait_ns) {}

  void insert(int64_t id, Key key, int64_t arrival_ns, int64_t arrival_seq) {
    entry e{key, arrival_ns, arrival_seq, id};
    if (!index_.emplace(id, e).second) throw std::logic_error("request " + std::to_string(id) + " queued twice");
    by_key_.insert(e);
    by_arrival_.emplace(arrival_ns, arrival_seq, id);
  }
  bool erase(int64_t id) {
    auto it = index_.find(id);
    if (it == index_.end()) return false;
    const entry& e = it->second;
    by_key_.erase(e);
    by_arrival_.erase({e.arrival_ns, e.arrival_seq, e.id});
    index_.erase(it);
    return true;
  }
  bool contains(int64_t id) const { return index_.count(id) != 0; }
  std::size_t size() const noexcept { return index_.size(); }

  // Writes min(cap, size) ids: the starved (waited >= max_wait_ns at now_ns; none when
  // max_wait_ns is 0) oldest first, then the others by key.
  uint32_t rank(int64_t now_ns, int64_t* out, uint32_t cap) const {
    uint32_t n = 0;
    bool guard = max_wait_ns_ > 0;
    if (guard)
      for (auto it = by_arrival_.begin(); it != by_arrival_.end() && n < cap; ++it) {
        if (!starved(std::get<0>(*it), now_ns)) break;
        out[n++] = std::get<2>(*it);
      }
    for (auto it = by_key_.begin(); it != by_key_.end() && n < cap; ++it)
      if (!guard || !starved(it->arrival_ns, now_ns)) out[n++] = it->id;
    return n;
  }

 private:
  struct entry {
    Key key;
    int64_t arrival_ns;
    int64_t arrival_seq;
    int64_t id;
    bool operator<(const entry& o) const {
      if (key < o.key) return true;
      if (o.key < key) return false;
      return arrival_seq < o.arrival_seq;
    }
  };
  bool starved(int64_t arrival_ns, int64_t now_ns) const { return now_ns - arrival_ns >= max_wait_ns_; }

  int64_t max_wait_ns_;
  std::unordered_map<int64_t, entry> index_;
  std::set<entry> by_key_;
  std::set<std::tuple<int64_t, int64_t, int64_t>> by_arrival_;  // (arrival_ns, arrival_seq, id)
};

}  // namespace troupe_policy_kit
