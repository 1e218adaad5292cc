#include "runtime/prefix/block_codec.hpp"

#include <cstring>

#include "runtime/core/error.hpp"
#include "runtime/prefix/crc32c.hpp"

namespace troupe::prefix {

// Layout (little-endian), in this order:
//   "TRPKVBLK" | u16 version | u16 identity length | identity | u16 dtype length | dtype
//   | i32 num_layers | i32 block_size | i32 n_kv_heads | i32 head_dim | i32 elem_bytes | i32 scale_bytes
//   | 16 B hash | 16 B parent | i32 num_tokens | num_tokens x i32 | u64 payload bytes
//   | payload | u32 CRC-32C of everything before it
namespace {

constexpr char kMagic[8] = {'T', 'R', 'P', 'K', 'V', 'B', 'L', 'K'};

class writer {
 public:
  explicit writer(std::string& out) : out_(out) {}
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  template <class T>
  void le(T v) {
    auto u = static_cast<std::make_unsigned_t<T>>(v);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>(static_cast<uint8_t>(u >> (8 * i))));
  }
  void str16(std::string_view s) {
    le<uint16_t>(static_cast<uint16_t>(s.size()));
    raw(s.data(), s.size());
  }

 private:
  std::string& out_;
};

class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}
  bool ok() const noexcept { return ok_; }
  size_t pos() const noexcept { return pos_; }
  std::string_view raw(size_t n) {
    if (!ok_ || in_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    auto s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  template <class T>
  T le() {
    auto s = raw(sizeof(T));
    std::make_unsigned_t<T> u = 0;
    for (size_t i = 0; i < s.size(); ++i) u |= static_cast<std::make_unsigned_t<T>>(static_cast<uint8_t>(s[i])) << (8 * i);
    return static_cast<T>(u);
  }
  std::string_view str16() { return raw(le<uint16_t>()); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace

std::string_view to_string(check_status s) noexcept {
  switch (s) {
    case check_status::ok: return "ok";
    case check_status::bad_length: return "bad_length";
    case check_status::bad_magic: return "bad_magic";
    case check_status::bad_version: return "bad_version";
    case check_status::identity_mismatch: return "identity_mismatch";
    case check_status::layout_mismatch: return "layout_mismatch";
    case check_status::hash_mismatch: return "hash_mismatch";
    case check_status::tokens_mismatch: return "tokens_mismatch";
    case check_status::checksum_mismatch: return "checksum_mismatch";
  }
  return "?";
}

block_codec::block_codec(std::string identity, kv_layout layout) : identity_(std::move(identity)), layout_(std::move(layout)) {
  const auto& l = layout_;
  if (l.num_layers < 1 || l.block_size < 1 || l.n_kv_heads < 1 || l.head_dim < 1 || l.elem_bytes < 1 ||
      l.scale_bytes < 0)
    throw_error(errc::invalid_argument,
                "block_codec: layout fields must be positive; got layers " + std::to_string(l.num_layers) +
                    ", block_size " + std::to_string(l.block_size) + ", kv heads " + std::to_string(l.n_kv_heads) +
                    ", head_dim " + std::to_string(l.head_dim) + ", element bytes " + std::to_string(l.elem_bytes) +
                    ", scale bytes " + std::to_string(l.scale_bytes));
  if (identity_.empty() || identity_.size() > 0xffff || l.kv_dtype.empty() || l.kv_dtype.size() > 0xffff)
    throw_error(errc::invalid_argument, "block_codec: identity and KV dtype must be 1..65535 bytes; got " +
                                            std::to_string(identity_.size()) + " and " +
                                            std::to_string(l.kv_dtype.size()));
}

size_t block_codec::header_bytes() const noexcept {
  return sizeof kMagic + 2 + 2 + identity_.size() + 2 + layout_.kv_dtype.size() + 6 * 4 + 16 + 16 + 4 +
         4 * static_cast<size_t>(layout_.block_size) + 8;
}

std::string block_codec::encode(const block_meta& meta, std::string_view payload) const {
  TROUPE_ASSERT(payload.size() == layout_.payload_bytes());
  TROUPE_ASSERT(meta.tokens.size() == static_cast<size_t>(layout_.block_size));
  std::string out;
  out.reserve(encoded_bytes());
  writer w(out);
  w.raw(kMagic, sizeof kMagic);
  w.le<uint16_t>(kBlockFormatVersion);
  w.str16(identity_);
  w.str16(layout_.kv_dtype);
  w.le<int32_t>(layout_.num_layers);
  w.le<int32_t>(layout_.block_size);
  w.le<int32_t>(layout_.n_kv_heads);
  w.le<int32_t>(layout_.head_dim);
  w.le<int32_t>(layout_.elem_bytes);
  w.le<int32_t>(layout_.scale_bytes);
  w.raw(meta.hash.bytes.data(), 16);
  w.raw(meta.parent.bytes.data(), 16);
  w.le<int32_t>(static_cast<int32_t>(meta.tokens.size()));
  for (int32_t t : meta.tokens) w.le<int32_t>(t);
  w.le<uint64_t>(payload.size());
  TROUPE_ASSERT(out.size() == header_bytes());
  w.raw(payload.data(), payload.size());
  w.le<uint32_t>(crc32c(out.data(), out.size()));
  return out;
}

check_status block_codec::check(std::string_view entry, const block_meta& expected, std::string_view* payload) const {
  reader r(entry);
  auto magic = r.raw(sizeof kMagic);
  if (!r.ok()) return check_status::bad_length;
  if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) return check_status::bad_magic;
  auto version = r.le<uint16_t>();
  if (!r.ok()) return check_status::bad_length;
  if (version != kBlockFormatVersion) return check_status::bad_version;
  // Header fields first (cheap, and they say why), the checksum over everything last.
  auto identity = r.str16();
  auto dtype = r.str16();
  int32_t shape[6];
  for (auto& v : shape) v = r.le<int32_t>();
  auto hash = r.raw(16);
  auto parent = r.raw(16);
  auto num_tokens = r.le<int32_t>();
  if (!r.ok()) return check_status::bad_length;
  if (identity != identity_ || dtype != layout_.kv_dtype) return check_status::identity_mismatch;
  if (shape[0] != layout_.num_layers || shape[1] != layout_.block_size || shape[2] != layout_.n_kv_heads ||
      shape[3] != layout_.head_dim || shape[4] != layout_.elem_bytes || shape[5] != layout_.scale_bytes ||
      num_tokens != layout_.block_size)
    return check_status::layout_mismatch;
  if (std::memcmp(hash.data(), expected.hash.bytes.data(), 16) != 0) return check_status::hash_mismatch;
  auto tokens = r.raw(4 * static_cast<size_t>(num_tokens));
  auto payload_bytes = r.le<uint64_t>();
  if (!r.ok()) return check_status::bad_length;
  if (std::memcmp(parent.data(), expected.parent.bytes.data(), 16) != 0 ||
      expected.tokens.size() != static_cast<size_t>(num_tokens))
    return check_status::tokens_mismatch;
  for (int32_t i = 0; i < num_tokens; ++i) {
    reader t(tokens.substr(4 * static_cast<size_t>(i), 4));
    if (t.le<int32_t>() != expected.tokens[static_cast<size_t>(i)]) return check_status::tokens_mismatch;
  }
  if (payload_bytes != layout_.payload_bytes()) return check_status::layout_mismatch;
  auto body = r.raw(payload_bytes);
  const size_t covered = r.pos();
  auto crc = r.le<uint32_t>();
  if (!r.ok()) return check_status::bad_length;
  if (r.pos() != entry.size()) return check_status::bad_length;  // trailing bytes: not what was written
  if (crc32c(entry.data(), covered) != crc) return check_status::checksum_mismatch;
  if (payload) *payload = body;
  return check_status::ok;
}

}  // namespace troupe::prefix
