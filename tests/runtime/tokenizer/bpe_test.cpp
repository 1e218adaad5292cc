// BPE merge order (lowest rank first, leftmost on ties), the two merge loops agreeing on real
// Qwen3 merges, and the merge-table errors.
#include <boost/test/unit_test.hpp>

#include <random>

#include "runtime/tokenizer/bpe.hpp"
#include "runtime/tokenizer/tokenizer_json.hpp"
#include "tests/runtime/tokenizer/test_util.hpp"

using namespace troupe::tok;

namespace {

// Tokens 0..255 are the bytes; then each merge in order makes the next id.
bpe_model tiny(const std::vector<std::pair<std::string, std::string>>& merges) {
  bpe_model m;
  m.reserve(512, 64);
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    m.add_token(b, std::string_view(&c, 1));
  }
  int32_t next = 256;
  for (const auto& [l, r] : merges)
    if (!m.token_id(l + r)) m.add_token(next++, l + r);
  for (const auto& [l, r] : merges) m.add_merge(l, r, "test");
  m.finish("test");
  return m;
}

std::vector<int32_t> run(const bpe_model& m, std::string_view w, int which) {
  std::vector<int32_t> out;
  if (which == 0) m.encode_word(w, out);
  if (which == 1) m.encode_word_small(w, out);
  if (which == 2) m.encode_word_heap(w, out);
  if (which == 3) BOOST_TEST(m.encode_word_buckets(w, out));
  return out;
}

const bpe_model& qwen_bpe() {
  static const tokenizer_data data = read_tokenizer_json(troupe::test::qwen_dir() + "/tokenizer.json");
  return data.bpe;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bpe)

BOOST_AUTO_TEST_CASE(lowest_rank_merges_first_then_leftmost) {
  bpe_model m = tiny({{"b", "c"}, {"a", "b"}});
  for (int which : {1, 2, 3}) {
    BOOST_TEST(run(m, "abc", which) == (std::vector<int32_t>{'a', 256}));  // "bc" (rank 0) beats "ab"
    BOOST_TEST(run(m, "ab", which) == (std::vector<int32_t>{257}));
  }
  bpe_model aa = tiny({{"a", "a"}, {"aa", "aa"}});
  for (int which : {1, 2, 3}) {
    BOOST_TEST(run(aa, "aaa", which) == (std::vector<int32_t>{256, 'a'}));  // leftmost pair first
    BOOST_TEST(run(aa, "aaaa", which) == (std::vector<int32_t>{257}));
    BOOST_TEST(run(aa, "aaaaa", which) == (std::vector<int32_t>{257, 'a'}));
    BOOST_TEST(run(aa, "x", which) == (std::vector<int32_t>{'x'}));
  }
}

BOOST_AUTO_TEST_CASE(small_and_heap_loops_agree_on_qwen_merges) {
  const bpe_model& m = qwen_bpe();
  BOOST_TEST(m.num_merges() == 151387u);
  const char* pool[] = {"a", "e", "t", "h", "in", "the", " ", "\xE4\xB8\x80", "\xE7\x9A\x84", "1", "!", "\xC3\xA9",
                        "ing", "tion", "\xF0\x9F\x98\x80", "ab", "\n", "=", "\xD0\xB0"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, std::size(pool) - 1), len(1, 16);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string w;
    for (size_t n = len(rng); n > 0; --n) w += pool[pick(rng)];
    if (w.size() > bpe_model::small_word_bytes) w.resize(bpe_model::small_word_bytes);
    auto small = run(m, w, 1);
    auto heap = run(m, w, 2);
    if (small != heap) {
      BOOST_ERROR("merge loops differ on a word of " << w.size() << " bytes");
      break;
    }
  }
}

BOOST_AUTO_TEST_CASE(bucket_loop_agrees_with_the_heap_on_long_words) {
  const bpe_model& m = qwen_bpe();
  const char* pool[] = {"a", "aa", "ab", " ", "  ", "\n", "!", "=", "the", "\xE4\xB8\x80", "\xF0\x9F\x98\x80", "0", "ing"};
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> pick(0, std::size(pool) - 1), len(300, 3000);
  std::uniform_int_distribution<int> run_len(1, 64);
  for (int iter = 0; iter < 60; ++iter) {
    std::string w;
    for (size_t n = len(rng); n > 0; --n) {  // runs of one piece, then another: repeats and edges
      std::string piece = pool[pick(rng)];
      for (int r = run_len(rng); r > 0; --r) w += piece;
    }
    auto heap = run(m, w, 2);
    auto buckets = run(m, w, 3);
    if (heap != buckets) {
      BOOST_ERROR("bucket and heap loops differ on a word of " << w.size() << " bytes");
      break;
    }
  }
}

BOOST_AUTO_TEST_CASE(bucket_loop_declines_merge_lists_that_are_not_rank_ordered) {
  // "bc" merges first (rank 0), making "abc" from "a" + "bc" at rank 1: fine, ranks grow.
  bpe_model ok = tiny({{"b", "c"}, {"a", "bc"}});
  std::vector<int32_t> out;
  BOOST_TEST(ok.encode_word_buckets("abc", out));
  BOOST_TEST(out == (std::vector<int32_t>{257}));
  // Here the pair made by the rank-1 merge ("x", "yz") has rank 0: only the heap orders that.
  bpe_model odd = tiny({{"x", "yz"}, {"y", "z"}});
  out.clear();
  BOOST_TEST(!odd.encode_word_buckets("xyz", out));
  BOOST_TEST(out.empty());
  BOOST_TEST(run(odd, "xyz", 2) == (std::vector<int32_t>{256}));
}

BOOST_AUTO_TEST_CASE(long_words_use_the_heap_and_merge_fully) {
  const bpe_model& m = qwen_bpe();
  std::string w(4096, 'a');
  auto ids = run(m, w, 0);
  std::string back;
  for (int32_t id : ids) back += m.token_bytes(id);
  BOOST_TEST(back == w);
  BOOST_TEST(ids.size() < w.size() / 4);  // long runs of 'a' merge into multi-byte tokens
}

BOOST_AUTO_TEST_CASE(merge_of_unknown_token_is_refused) {
  bpe_model m;
  m.reserve(300, 4);
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    m.add_token(b, std::string_view(&c, 1));
  }
  troupe::test::expect_error([&] { m.add_merge("a", "b", "merges"); }, troupe::errc::invalid_checkpoint,
                             "merges: merge 0 joins a part or makes a token that is not in the vocabulary");
  troupe::test::expect_error([&] { m.add_token(5, "dup"); }, troupe::errc::invalid_checkpoint, "appears twice");
  troupe::test::expect_error([&] { m.add_token(300, "a"); }, troupe::errc::invalid_checkpoint,
                             "decode to the same bytes");
}

BOOST_AUTO_TEST_SUITE_END()
