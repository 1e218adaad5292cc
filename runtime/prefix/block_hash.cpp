#include "runtime/prefix/block_hash.hpp"

#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/prefix/sha256.hpp"

namespace troupe::prefix {

namespace {

void check_part(std::string_view what, std::string_view value, bool may_be_empty) {
  if (value.empty() && !may_be_empty)
    throw_error(errc::invalid_argument, "prefix cache identity: " + std::string(what) + " is empty");
  for (char c : value)
    if (c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r')
      throw_error(errc::invalid_argument, "prefix cache identity: " + std::string(what) + " \"" +
                                              std::string(value) + "\" holds ':' or white space, which "
                                              "would make store keys ambiguous");
}

block_hash truncate(const sha256::digest& d) {
  block_hash h;
  std::memcpy(h.bytes.data(), d.data(), h.bytes.size());
  return h;
}

}  // namespace

std::string block_hash::hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    s[2 * i] = kDigits[bytes[i] >> 4];
    s[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return s;
}

block_hash block_hash::from_hex(std::string_view hex) {
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  block_hash h;
  bool ok = hex.size() == 32;
  for (size_t i = 0; ok && i < 16; ++i) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    h.bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  if (!ok)
    throw_error(errc::invalid_argument, "block hash \"" + std::string(hex) + "\": expected 32 hex digits");
  return h;
}

size_t block_hash_hasher::operator()(const block_hash& h) const noexcept {
  uint64_t v;
  std::memcpy(&v, h.bytes.data(), sizeof v);
  return static_cast<size_t>(v);
}

std::string cache_identity::key_component() const {
  check_part("model fingerprint", model_fingerprint, false);
  check_part("kv dtype", kv_dtype, false);
  check_part("adapter", adapter, true);
  check_part("arithmetic", arithmetic, true);
  if (block_size < 1)
    throw_error(errc::invalid_argument, "prefix cache identity: block_size must be >= 1; got " +
                                            std::to_string(block_size));
  std::string s = model_fingerprint + ":kv-" + kv_dtype;
  if (!adapter.empty()) s += ":lora-" + adapter;
  if (!arithmetic.empty()) s += ":" + arithmetic;
  return s;
}

block_hash root_hash(const cache_identity& id) {
  std::string text = "troupe-prefix-cache/" + std::string(kHashVersion) + "\nidentity=" + id.key_component() +
                     "\nblock_size=" + std::to_string(id.block_size) + "\n";
  return truncate(sha256::of(text.data(), text.size()));
}

block_hash salted_root(const block_hash& root, std::string_view salt) {
  if (salt.empty()) return root;
  const std::string head = "troupe-prefix-cache/" + std::string(kHashVersion) + "\ncache_salt\n";
  sha256 h;
  h.update(head.data(), head.size());
  h.update(root.bytes.data(), root.bytes.size());
  h.update(salt.data(), salt.size());
  return truncate(h.finish());
}

block_hash chain_hash(const block_hash& parent, std::span<const int32_t> tokens) {
  sha256 h;
  h.update(parent.bytes.data(), parent.bytes.size());
  // Little-endian int32 whatever the host: the bytes, not the machine, define the hash.
  uint8_t buf[256];
  size_t n = 0;
  for (int32_t t : tokens) {
    auto u = static_cast<uint32_t>(t);
    buf[n++] = static_cast<uint8_t>(u);
    buf[n++] = static_cast<uint8_t>(u >> 8);
    buf[n++] = static_cast<uint8_t>(u >> 16);
    buf[n++] = static_cast<uint8_t>(u >> 24);
    if (n == sizeof buf) {
      h.update(buf, n);
      n = 0;
    }
  }
  h.update(buf, n);
  return truncate(h.finish());
}

void extend_block_hashes(std::vector<block_hash>& hashes, const block_hash& root, std::span<const int32_t> tokens,
                         int32_t block_size) {
  TROUPE_ASSERT(block_size > 0);
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  for (size_t b = hashes.size(); b < full; ++b) {
    const block_hash& parent = b == 0 ? root : hashes[b - 1];
    hashes.push_back(chain_hash(parent, tokens.subspan(b * block_size, static_cast<size_t>(block_size))));
  }
}

std::string store_key(std::string_view ns, std::string_view key_component, const block_hash& h) {
  std::string k;
  k.reserve(ns.size() + key_component.size() + 40);
  k.append(ns).append(":").append(kHashVersion).append(":").append(key_component).append(":").append(h.hex());
  return k;
}

std::string store_key(std::string_view ns, const cache_identity& id, const block_hash& h) {
  check_part("namespace", ns, false);
  return store_key(ns, id.key_component(), h);
}

}  // namespace troupe::prefix
