#include "runtime/prefix/remote_cache.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe::prefix {

std::string_view to_string(fetch_decision d) noexcept {
  switch (d) {
    case fetch_decision::fetch: return "fetch";
    case fetch_decision::recompute: return "recompute";
    case fetch_decision::not_found: return "not_found";
    case fetch_decision::unavailable: return "unavailable";
  }
  return "?";
}

int64_t remote_stats::rejected_total() const noexcept {
  int64_t n = 0;
  for (auto v : rejected) n += v;
  return n;
}

remote_cache::remote_cache(kv_store& store, block_codec codec, const cache_identity& id, remote_options opts,
                           cost_model& cost)
    : store_(store), codec_(std::move(codec)), key_component_(id.key_component()), opts_(std::move(opts)), cost_(cost) {
  (void)store_key(opts_.ns, id, block_hash{});  // validates the namespace
  if (codec_.identity() != key_component_)
    throw_error(errc::invalid_argument, "remote_cache: codec identity \"" + codec_.identity() +
                                            "\" differs from the cache identity \"" + key_component_ + "\"");
}

static double seconds_since(store_clock::time_point t0) {
  return std::chrono::duration<double>(store_clock::now() - t0).count();
}

store_status remote_cache::leading_run(std::span<const std::string> keys, size_t& run,
                                       store_clock::time_point deadline) {
  run = 0;
  std::vector<uint8_t> found;
  if (opts_.strategy == lookup_strategy::pipelined) {
    auto t0 = store_clock::now();
    auto st = store_.exists(keys, found, deadline);
    if (st != store_status::ok) return st;
    cost_.observe_round_trip(seconds_since(t0));
    while (run < keys.size() && found[run]) ++run;
    return st;
  }
  // Largest run such that keys[run - 1] exists; a gap below it is caught when reading.
  size_t lo = 0, hi = keys.size();
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    auto t0 = store_clock::now();
    auto st = store_.exists(keys.subspan(mid - 1, 1), found, deadline);
    if (st != store_status::ok) return st;
    cost_.observe_round_trip(seconds_since(t0));
    if (found[0])
      lo = mid;
    else
      hi = mid - 1;
  }
  run = lo;
  return store_status::ok;
}

fetch_result remote_cache::fetch(const remote_lookup& q, store_clock::time_point deadline) {
  fetch_result res;
  res.blocks.first_block = q.first_block;
  ++stats_.num_lookups;
  stats_.blocks_looked_up += static_cast<int64_t>(q.blocks.size());
  auto decide = [&](fetch_decision d) {
    res.decision = d;
    ++stats_.decisions[static_cast<size_t>(d)];
    return res;
  };
  if (q.blocks.empty()) return decide(fetch_decision::not_found);

  std::vector<std::string> keys;
  keys.reserve(q.blocks.size());
  for (const auto& b : q.blocks) keys.push_back(key(b.hash));
  size_t run = 0;
  auto t_lookup = store_clock::now();
  auto found = leading_run(keys, run, deadline);
  res.lookup_s = seconds_since(t_lookup);
  if (auto st = found; st != store_status::ok) {
    ++stats_.store_failures;
    return decide(fetch_decision::unavailable);
  }
  res.num_found = run;
  stats_.blocks_found += static_cast<int64_t>(run);
  if (run == 0) return decide(fetch_decision::not_found);

  const size_t entry_bytes = codec_.encoded_bytes();
  const size_t by_memory = std::max<size_t>(1, opts_.max_fetch_bytes / entry_bytes);
  const double budget_s = std::chrono::duration<double>(deadline - store_clock::now()).count();
  res.plan = cost_.decide(std::min(run, by_memory), entry_bytes, codec_.layout().block_size, budget_s);
  if (res.plan.num_blocks == 0) return decide(fetch_decision::recompute);

  // In windows: a window that misses the deadline loses only itself; the blocks before it are
  // checked and kept (they are a contiguous prefix), and each window refines the bandwidth.
  const size_t window = std::max<size_t>(1, opts_.fetch_window_bytes / entry_bytes);
  const auto refresh = opts_.refresh_ttl_on_hit ? opts_.ttl : std::chrono::seconds(0);
  const auto keys_span = std::span<const std::string>(keys);
  auto t_read = store_clock::now();
  store_status failed = store_status::ok;
  bool chain_ended = false;
  std::vector<std::optional<stored_value>> values;
  for (size_t at = 0; at < res.plan.num_blocks && !chain_ended; at += window) {
    const size_t n = std::min(window, res.plan.num_blocks - at);
    auto t0 = store_clock::now();
    if (auto st = store_.get(keys_span.subspan(at, n), values, refresh, deadline); st != store_status::ok) {
      ++stats_.store_failures;
      failed = st;
      break;
    }
    size_t bytes = 0;
    for (const auto& v : values)
      if (v) bytes += v->bytes.size();
    cost_.observe_fetch(bytes, seconds_since(t0));
    res.bytes_read += bytes;
    // The chain must stay contiguous: the first missing or refused block ends it.
    for (size_t i = 0; i < n; ++i) {
      if (!values[i]) {  // expired or evicted since EXISTS
        chain_ended = true;
        break;
      }
      std::string_view payload;
      auto st = codec_.check(values[i]->bytes, q.blocks[at + i], &payload);
      if (st != check_status::ok) {
        ++stats_.rejected[static_cast<size_t>(st)];
        chain_ended = true;
        break;
      }
      res.blocks.payloads.push_back(stored_value{values[i]->owner, payload});
    }
  }
  res.read_s = seconds_since(t_read);
  stats_.bytes_fetched += static_cast<int64_t>(res.bytes_read);
  stats_.blocks_fetched += static_cast<int64_t>(res.blocks.payloads.size());
  if (!res.blocks.payloads.empty()) return decide(fetch_decision::fetch);
  return decide(failed != store_status::ok ? fetch_decision::unavailable : fetch_decision::recompute);
}

size_t remote_cache::publish(std::span<const saved_block> blocks, store_clock::time_point deadline) {
  if (blocks.empty()) return 0;
  stats_.blocks_offered += static_cast<int64_t>(blocks.size());
  std::vector<std::string> keys;
  keys.reserve(blocks.size());
  for (const auto& b : blocks) keys.push_back(key(b.meta.hash));
  // Only what the store lacks crosses the wire: another replica may have published it already.
  std::vector<uint8_t> found;
  if (store_.exists(keys, found, deadline) != store_status::ok) {
    ++stats_.store_failures;
    return 0;
  }
  std::vector<std::string> put_keys;
  std::vector<std::string> entries;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (found[i]) {
      ++stats_.blocks_present;
      continue;
    }
    put_keys.push_back(std::move(keys[i]));
    entries.push_back(codec_.encode(blocks[i].meta, blocks[i].payload));
  }
  if (put_keys.empty()) return 0;
  std::vector<std::string_view> values(entries.begin(), entries.end());
  size_t written = 0;
  if (store_.put(put_keys, values, opts_.ttl, written, deadline) != store_status::ok) {
    ++stats_.store_failures;
    return 0;
  }
  stats_.blocks_written += static_cast<int64_t>(written);
  stats_.bytes_written += static_cast<int64_t>(written * codec_.encoded_bytes());
  return written;
}

}  // namespace troupe::prefix
