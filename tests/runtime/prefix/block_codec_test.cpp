// Serialized blocks: round trip, and every way an entry can be wrong is refused with its reason.
#include <boost/test/unit_test.hpp>

#include "tests/runtime/prefix/print.hpp"

#include <numeric>

#include "runtime/core/error.hpp"
#include "runtime/prefix/block_codec.hpp"

using namespace troupe;
using namespace troupe::prefix;

namespace {

kv_layout small_layout() {
  kv_layout l;
  l.num_layers = 2;
  l.block_size = 4;
  l.n_kv_heads = 2;
  l.head_dim = 8;
  return l;
}

struct fixture {
  block_codec codec{"fp-1:kv-f32", small_layout()};
  block_meta meta;
  std::string payload;
  fixture() {
    cache_identity id;
    id.model_fingerprint = "fp-1";
    id.block_size = 4;
    meta.parent = root_hash(id);
    meta.tokens = {11, 12, 13, 14};
    meta.hash = chain_hash(meta.parent, meta.tokens);
    payload.resize(codec.layout().payload_bytes());
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 + 3);
  }
  check_status check(const std::string& entry, const block_meta& expected) const {
    std::string_view p;
    return codec.check(entry, expected, &p);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(block_codec_suite)

BOOST_FIXTURE_TEST_CASE(round_trip_views_the_payload, fixture) {
  BOOST_TEST(codec.layout().payload_bytes() == 2u * 2 * 4 * 2 * 8 * 4);
  auto entry = codec.encode(meta, payload);
  BOOST_TEST(entry.size() == codec.encoded_bytes());
  BOOST_TEST(entry.substr(0, 8) == "TRPKVBLK");
  std::string_view got;
  BOOST_TEST(codec.check(entry, meta, &got) == check_status::ok);
  BOOST_TEST(got == payload);
  BOOST_TEST(got.data() == entry.data() + codec.header_bytes());  // a view, not a copy
}

BOOST_FIXTURE_TEST_CASE(each_corruption_is_refused_with_its_reason, fixture) {
  const auto good = codec.encode(meta, payload);
  auto edited = [&](size_t at, char x) {
    auto e = good;
    e[at] = static_cast<char>(e[at] ^ x);
    return e;
  };
  const size_t id_len = codec.identity().size();
  // offsets: magic 0..7, version 8..9, identity length 10..11, identity 12.., dtype length, dtype,
  // six i32, hash, parent, token count, tokens, payload length, payload, crc
  const size_t shape_at = 12 + id_len + 2 + 3;
  const size_t hash_at = shape_at + 24;
  const size_t parent_at = hash_at + 16;
  const size_t tokens_at = parent_at + 16 + 4;
  BOOST_TEST(check(edited(0, 1), meta) == check_status::bad_magic);
  BOOST_TEST(check(edited(8, 1), meta) == check_status::bad_version);
  BOOST_TEST(check(edited(12, 1), meta) == check_status::identity_mismatch);
  BOOST_TEST(check(edited(12 + id_len + 2, 1), meta) == check_status::identity_mismatch);  // dtype
  BOOST_TEST(check(edited(shape_at, 1), meta) == check_status::layout_mismatch);            // num_layers
  BOOST_TEST(check(edited(shape_at + 12, 1), meta) == check_status::layout_mismatch);       // head_dim
  BOOST_TEST(check(edited(shape_at + 20, 1), meta) == check_status::layout_mismatch);       // scale bytes
  BOOST_TEST(check(edited(hash_at + 3, 1), meta) == check_status::hash_mismatch);
  BOOST_TEST(check(edited(parent_at, 1), meta) == check_status::tokens_mismatch);
  BOOST_TEST(check(edited(tokens_at + 4, 1), meta) == check_status::tokens_mismatch);
  BOOST_TEST(check(edited(codec.header_bytes() + 100, 1), meta) == check_status::checksum_mismatch);
  BOOST_TEST(check(edited(good.size() - 1, 1), meta) == check_status::checksum_mismatch);  // the crc itself
  BOOST_TEST(check(good.substr(0, good.size() - 1), meta) == check_status::bad_length);
  BOOST_TEST(check(good.substr(0, 5), meta) == check_status::bad_length);
  BOOST_TEST(check(good + "x", meta) == check_status::bad_length);
  BOOST_TEST(check("", meta) == check_status::bad_length);
}

BOOST_FIXTURE_TEST_CASE(an_honest_entry_of_another_block_or_model_is_refused, fixture) {
  const auto entry = codec.encode(meta, payload);
  block_meta other = meta;
  other.tokens[2] = 99;
  other.hash = chain_hash(other.parent, other.tokens);
  BOOST_TEST(check(entry, other) == check_status::hash_mismatch);  // stored under the wrong key
  block_meta same_hash_other_tokens = meta;                        // a hash collision, hypothetically
  same_hash_other_tokens.tokens[0] = 1;
  BOOST_TEST(check(entry, same_hash_other_tokens) == check_status::tokens_mismatch);

  block_codec foreign("fp-2:kv-f32", small_layout());
  BOOST_TEST(foreign.check(entry, meta, nullptr) == check_status::identity_mismatch);
  kv_layout wider = small_layout();
  wider.head_dim = 16;
  block_codec other_shape("fp-1:kv-f32", wider);
  BOOST_TEST(other_shape.check(entry, meta, nullptr) == check_status::layout_mismatch);
  kv_layout int8 = small_layout();
  int8.kv_dtype = "int8";
  int8.elem_bytes = 1;
  int8.scale_bytes = 4;
  block_codec other_dtype("fp-1:kv-f32", int8);
  BOOST_TEST(other_dtype.check(entry, meta, nullptr) == check_status::identity_mismatch);
}

BOOST_AUTO_TEST_CASE(bad_layouts_are_refused) {
  kv_layout l = small_layout();
  l.head_dim = 0;
  BOOST_CHECK_EXCEPTION(block_codec("x", l), troupe::error, [](const troupe::error& e) {
    return e.code() == errc::invalid_argument && std::string(e.what()).find("head_dim 0") != std::string::npos;
  });
  BOOST_CHECK_EXCEPTION(block_codec("", small_layout()), troupe::error, [](const troupe::error& e) {
    return std::string(e.what()).find("1..65535 bytes; got 0") != std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
