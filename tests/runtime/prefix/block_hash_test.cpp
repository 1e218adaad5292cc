// Block hashes: golden values computed independently (Python hashlib, docs/prefix_cache.md),
// chaining, identity sensitivity, key layout and the errors for bad identities.
#include <boost/test/unit_test.hpp>

#include "tests/runtime/prefix/print.hpp"

#include <numeric>

#include "runtime/core/error.hpp"
#include "runtime/prefix/block_hash.hpp"

using namespace troupe;
using namespace troupe::prefix;

namespace {
cache_identity test_identity() {
  cache_identity id;
  id.model_fingerprint = "qwen3-test-fp";
  return id;
}
bool fails_with(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
  } catch (const troupe::error& e) {
    return e.code() == errc::invalid_argument && std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(block_hash_suite)

BOOST_AUTO_TEST_CASE(golden_values_match_the_documented_algorithm) {
  // python3: hashlib.sha256(b"troupe-prefix-cache/v1\nidentity=qwen3-test-fp:kv-f32\nblock_size=16\n").digest()[:16]
  auto root = root_hash(test_identity());
  BOOST_TEST(root.hex() == "ccfa368b2ec16b50610d695d466eed9f");
  std::vector<int32_t> t0(16);
  std::iota(t0.begin(), t0.end(), 0);
  auto b0 = chain_hash(root, t0);  // sha256(root || struct.pack("<16i", *range(16)))[:16]
  BOOST_TEST(b0.hex() == "b9519d5e48a8e6ed631b0812590c79e9");
  std::vector<int32_t> t1 = {151643, -1, 2147483647};
  for (int32_t i = 100; i < 113; ++i) t1.push_back(i);
  BOOST_TEST(chain_hash(b0, t1).hex() == "7faa1317d9e485c666ac389291cd0f76");

  cache_identity other = test_identity();
  other.kv_dtype = "int8";
  other.adapter = "sql";
  other.block_size = 32;
  BOOST_TEST(root_hash(other).hex() == "67e2ab2430c8b2475e2346d5878cb390");
}

BOOST_AUTO_TEST_CASE(a_cache_salt_roots_its_own_chain) {
  // python3: hashlib.sha256(b"troupe-prefix-cache/v1\ncache_salt\n" + root + b"tenant-a").digest()[:16]
  auto root = root_hash(test_identity());
  BOOST_TEST(salted_root(root, "tenant-a").hex() == "1f156b1eb7a6df30a82a71c091c76286");
  BOOST_TEST(salted_root(root, "") == root);  // no salt: the identity's own root
  BOOST_TEST(!(salted_root(root, "tenant-b") == salted_root(root, "tenant-a")));
  BOOST_TEST(!(salted_root(root, "tenant-a") == root));
  auto id = test_identity();
  id.adapter = "sql";
  BOOST_TEST(!(salted_root(root_hash(id), "tenant-a") == salted_root(root, "tenant-a")));
}

BOOST_AUTO_TEST_CASE(every_identity_field_changes_the_root) {
  auto base = root_hash(test_identity());
  auto with = [&](auto edit) {
    auto id = test_identity();
    edit(id);
    return root_hash(id);
  };
  BOOST_TEST(!(with([](cache_identity& i) { i.model_fingerprint += "x"; }) == base));
  BOOST_TEST(!(with([](cache_identity& i) { i.kv_dtype = "fp8"; }) == base));
  BOOST_TEST(!(with([](cache_identity& i) { i.adapter = "a"; }) == base));
  BOOST_TEST(!(with([](cache_identity& i) { i.arithmetic = "int8-dequant"; }) == base));
  BOOST_TEST(!(with([](cache_identity& i) { i.block_size = 32; }) == base));
  BOOST_TEST(with([](cache_identity&) {}) == base);
}

BOOST_AUTO_TEST_CASE(extend_hashes_full_blocks_only_and_continues_where_it_stopped) {
  auto root = root_hash(test_identity());
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 1000);
  std::vector<block_hash> h;
  extend_block_hashes(h, root, std::span(tokens).first(15), 16);
  BOOST_TEST(h.size() == 0u);
  extend_block_hashes(h, root, std::span(tokens).first(20), 16);
  BOOST_TEST(h.size() == 1u);
  extend_block_hashes(h, root, tokens, 16);
  BOOST_TEST(h.size() == 2u);
  BOOST_TEST(h[0] == chain_hash(root, std::span(tokens).first(16)));
  BOOST_TEST(h[1] == chain_hash(h[0], std::span(tokens).subspan(16, 16)));
  // Same block content after a different parent: a different hash (the chain is in it).
  BOOST_TEST(!(chain_hash(root, std::span(tokens).subspan(16, 16)) == h[1]));
}

BOOST_AUTO_TEST_CASE(keys_and_hex_round_trip) {
  auto id = test_identity();
  auto h = root_hash(id);
  BOOST_TEST(store_key("troupe", id, h) == "troupe:v1:qwen3-test-fp:kv-f32:ccfa368b2ec16b50610d695d466eed9f");
  id.adapter = "sql";
  BOOST_TEST(store_key("ns2", id, h) == "ns2:v1:qwen3-test-fp:kv-f32:lora-sql:ccfa368b2ec16b50610d695d466eed9f");
  id.arithmetic = "int8-dequant";
  BOOST_TEST(id.key_component() == "qwen3-test-fp:kv-f32:lora-sql:int8-dequant");
  BOOST_TEST(block_hash::from_hex(h.hex()) == h);
  BOOST_TEST(block_hash::from_hex("CCFA368B2EC16B50610D695D466EED9F") == h);
}

BOOST_AUTO_TEST_CASE(bad_identities_and_hex_are_refused) {
  auto id = test_identity();
  BOOST_TEST(fails_with([&] { (void)store_key("", id, block_hash{}); }, "namespace is empty"));
  BOOST_TEST(fails_with([&] { (void)store_key("a:b", id, block_hash{}); }, "namespace \"a:b\" holds ':'"));
  id.model_fingerprint = "";
  BOOST_TEST(fails_with([&] { (void)root_hash(id); }, "model fingerprint is empty"));
  id.model_fingerprint = "has space";
  BOOST_TEST(fails_with([&] { (void)root_hash(id); }, "\"has space\" holds ':' or white space"));
  id = test_identity();
  id.arithmetic = "int8:x";
  BOOST_TEST(fails_with([&] { (void)root_hash(id); }, "\"int8:x\" holds ':' or white space"));
  id = test_identity();
  id.block_size = 0;
  BOOST_TEST(fails_with([&] { (void)root_hash(id); }, "block_size must be >= 1; got 0"));
  BOOST_TEST(fails_with([&] { (void)block_hash::from_hex("abc"); }, "expected 32 hex digits"));
  BOOST_TEST(fails_with([&] { (void)block_hash::from_hex("zzfa368b2ec16b50610d695d466eed9f"); }, "expected 32 hex digits"));
}

BOOST_AUTO_TEST_SUITE_END()
