// Slicing weights for tensor parallelism: row slices are views of the same elements, column slices
// copies of them, in every stored form (float dtypes, INT8 with column groups or one scale a row,
// 4-bit u4 codes with zeros, FP8 with 128 x 128-style blocks), and the golden checkpoint's shards
// hold each rank's heads, MLP columns and vocabulary range.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

#include "kernels/kernels.hpp"
#include "runtime/core/error.hpp"
#include "runtime/model/shard.hpp"

using namespace troupe;

namespace {

// A weight of `type` with random bytes (and scales / zeros for the quantized forms).
struct synthetic {
  synthetic(dtype type, int64_t rows, int64_t cols, int32_t group_rows, int32_t group_cols) {
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    std::mt19937 rng(static_cast<uint32_t>(rows * 31 + cols));
    data.resize(static_cast<size_t>(w.bytes()));
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    // Finite values only (a NaN never equals itself): clear the top exponent bit of each element.
    if (type == dtype::bf16)
      for (size_t i = 1; i < data.size(); i += 2) data[i] &= 0x3f;
    if (type == dtype::f32)
      for (size_t i = 3; i < data.size(); i += 4) data[i] &= 0x3f;
    if (type == dtype::f8_e4m3)  // no NaN codes (0x7f / 0xff)
      for (auto& b : data) b &= 0x7e;
    w.data = data.data();
    if (group_cols > 0) {
      w.group_rows = group_rows;
      w.group_cols = group_cols;
      scales.resize(static_cast<size_t>(w.scale_rows() * w.scale_cols()));
      for (auto& s : scales) s = 0.01f + static_cast<float>(rng() % 1000) * 1e-4f;
      w.scales = scales.data();
      if (type == dtype::u4) {
        zeros.resize(static_cast<size_t>(w.scale_rows() * w.scale_cols()));
        for (auto& z : zeros) z = static_cast<uint8_t>(rng() % 16);
        w.zeros = zeros.data();
      }
    }
  }
  kernels::weight_ref w;
  std::vector<uint8_t> data, zeros;
  std::vector<float> scales;
};

float element(const kernels::weight_ref& w, int64_t r, int64_t c) {
  if (w.scales) return kernels::dequantized_at(w, r, c);
  const auto* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes();
  if (w.type == dtype::f32) {
    float v;
    std::memcpy(&v, row + c * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, row + c * 2, 2);
  return bf16_to_f32(h);
}

void check_slices(const kernels::weight_ref& w, int64_t r0, int64_t nr, int64_t c0, int64_t nc, const char* what) {
  const auto rows = slice_rows(w, r0, nr);
  BOOST_TEST(rows.rows == nr);
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t c = 0; c < w.cols; ++c)
      BOOST_TEST(element(rows, r, c) == element(w, r0 + r, c), what << " rows: (" << r << ", " << c << ")");
  std::vector<std::shared_ptr<const void>> owned;
  const auto cols = copy_columns(w, c0, nc, owned);
  BOOST_TEST(cols.cols == nc);
  BOOST_TEST(!owned.empty());
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < nc; ++c)
      BOOST_TEST(element(cols, r, c) == element(w, r, c0 + c), what << " columns: (" << r << ", " << c << ")");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shard_suite)

BOOST_AUTO_TEST_CASE(slices_keep_every_element_in_every_stored_form) {
  check_slices(synthetic(dtype::f32, 6, 40, 0, 0).w, 2, 3, 8, 24, "f32");
  check_slices(synthetic(dtype::bf16, 6, 40, 0, 0).w, 3, 3, 20, 20, "bf16");
  check_slices(synthetic(dtype::i8, 6, 128, 1, 32).w, 1, 4, 64, 64, "int8, groups of 32");
  check_slices(synthetic(dtype::i8, 6, 96, 1, 96).w, 2, 2, 40, 24, "int8, one scale a row");
  check_slices(synthetic(dtype::u4, 4, 128, 1, 32).w, 1, 2, 32, 64, "u4, groups of 32");
  check_slices(synthetic(dtype::f8_e4m3, 64, 64, 16, 16).w, 16, 32, 32, 32, "fp8, 16 x 16 blocks");
}

BOOST_AUTO_TEST_CASE(the_golden_models_shards_hold_each_ranks_part) {
  auto full = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-dense");
  const auto& c = full->config;  // 4 query heads, 2 KV heads, head_dim 32, intermediate 160
  for (int32_t r = 0; r < 2; ++r) {
    auto s = shard_checkpoint(*full, r, 2);
    BOOST_TEST(s->config.num_attention_heads == 2);
    BOOST_TEST(s->config.num_key_value_heads == 1);
    BOOST_TEST(s->config.intermediate_size == 80);
    BOOST_TEST(s->config.vocab_size == c.vocab_size);
    const auto& fl = full->weights.layers[1];
    const auto& sl = s->weights.layers[1];
    BOOST_TEST(sl.q_proj.rows == 64);
    BOOST_TEST(sl.q_proj.data == static_cast<const uint8_t*>(fl.q_proj.data) + r * 64 * fl.q_proj.row_bytes());
    BOOST_TEST(sl.k_proj.data == static_cast<const uint8_t*>(fl.k_proj.data) + r * 32 * fl.k_proj.row_bytes());
    BOOST_TEST(sl.gate_proj.rows == 80);
    BOOST_TEST(sl.o_proj.cols == 64);
    BOOST_TEST(sl.down_proj.cols == 80);
    for (int64_t row : {int64_t{0}, int64_t{63}})
      for (int64_t col : {int64_t{0}, int64_t{17}, int64_t{63}})
        BOOST_TEST(element(sl.o_proj, row, col) == element(fl.o_proj, row, r * 64 + col));
    BOOST_TEST(element(sl.down_proj, 5, 79) == element(fl.down_proj, 5, r * 80 + 79));
    BOOST_TEST(s->weights.lm_head.rows == c.vocab_size / 2);
    BOOST_TEST(vocab_range_begin(*full, r, 2) == r * c.vocab_size / 2);
    BOOST_TEST(s->weights.embed_tokens.data == full->weights.embed_tokens.data);  // every rank embeds every id
  }
  BOOST_TEST(vocab_range_begin(*full, 2, 2) == c.vocab_size);
  BOOST_CHECK_THROW(shard_checkpoint(*full, 2, 2), troupe::error);
}

// A group larger than the model's 2 KV heads: each of 4 ranks keeps its one query head and a view
// of that head's KV head (ranks 0-1 head 0, ranks 2-3 head 1), as vLLM replicates them; the stored
// config counts every replica. 3 ranks split neither the query heads nor the KV heads.
BOOST_AUTO_TEST_CASE(a_group_larger_than_the_kv_heads_replicates_them) {
  auto full = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-dense");
  const auto& c = full->config;  // 4 query heads, 2 KV heads, head_dim 32
  for (int32_t r = 0; r < 4; ++r) {
    auto s = shard_checkpoint(*full, r, 4);
    BOOST_TEST(s->config.num_attention_heads == 1);
    BOOST_TEST(s->config.num_key_value_heads == 1);
    BOOST_TEST(kv_head_begin(c.num_key_value_heads, r, 4) == r / 2);
    for (size_t l = 0; l < full->weights.layers.size(); ++l) {
      const auto& fl = full->weights.layers[l];
      const auto& sl = s->weights.layers[l];
      BOOST_TEST(sl.q_proj.data == static_cast<const uint8_t*>(fl.q_proj.data) + r * 32 * fl.q_proj.row_bytes());
      BOOST_TEST(sl.k_proj.rows == 32);
      BOOST_TEST(sl.k_proj.data == static_cast<const uint8_t*>(fl.k_proj.data) + (r / 2) * 32 * fl.k_proj.row_bytes());
      BOOST_TEST(sl.v_proj.data == static_cast<const uint8_t*>(fl.v_proj.data) + (r / 2) * 32 * fl.v_proj.row_bytes());
      BOOST_TEST((sl.k_norm == fl.k_norm));
    }
  }
  BOOST_TEST(stored_kv_config(c, 4).num_key_value_heads == 4);
  BOOST_TEST(stored_kv_config(c, 2).num_key_value_heads == 2);
  BOOST_TEST(stored_kv_config(c, 1).num_key_value_heads == 2);
  checkpoint odd;  // 6 query heads and 4 KV heads over 3 ranks: the KV heads neither split nor replicate
  odd.config = c;
  odd.config.num_attention_heads = 6;
  odd.config.num_key_value_heads = 4;
  odd.config.num_hidden_layers = 0;
  odd.weights.lm_head.rows = 16;
  try {
    check_shardable(odd, 3);
    BOOST_ERROR("3 ranks accepted 4 KV heads");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("tensor_parallel_size 3: num_key_value_heads (4) is neither a multiple nor a divisor of it") !=
                   std::string::npos,
               e.what());
  }
}

// Expert parallelism: each rank holds its contiguous range of experts whole (the same memory, no
// copy) and no other expert; attention, the router and lm_head split or stay as without it.
BOOST_AUTO_TEST_CASE(expert_parallel_shards_hold_whole_experts) {
  auto full = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-moe");
  const auto& c = full->config;  // 8 experts of width 48, 4 query heads, 2 KV heads
  BOOST_TEST(splits_experts(c, {2, true}));
  BOOST_TEST(!splits_experts(c, {2, false}));
  BOOST_TEST(!splits_experts(c, {1, true}));
  auto dense = load_checkpoint(TROUPE_TEST_DATA_DIR "/golden/tiny-dense");
  BOOST_TEST(!splits_experts(dense->config, {2, true}));  // nothing to split: the flag changes nothing
  const int32_t size = 2;  // 2 KV heads: attention splits over 2 ranks at most
  int64_t held = 0;
  for (int32_t r = 0; r < size; ++r) {
    auto s = shard_checkpoint(*full, r, parallel_config{size, true});
    BOOST_TEST(s->config.moe_intermediate_size == c.moe_intermediate_size);
    BOOST_TEST(s->config.num_attention_heads == c.num_attention_heads / size);
    for (size_t l = 0; l < full->weights.layers.size(); ++l) {
      const auto& fl = full->weights.layers[l];
      const auto& sl = s->weights.layers[l];
      BOOST_TEST(sl.router.data == fl.router.data);
      BOOST_TEST(sl.q_proj.rows == fl.q_proj.rows / size);
      BOOST_REQUIRE_EQUAL(sl.experts.size(), fl.experts.size());
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const auto& se = sl.experts[static_cast<size_t>(e)];
        const auto& fe = fl.experts[static_cast<size_t>(e)];
        const bool mine = e >= expert_range_begin(c.num_experts, r, size) && e < expert_range_begin(c.num_experts, r + 1, size);
        if (mine) {
          ++held;
          BOOST_TEST(se.gate_proj.data == fe.gate_proj.data);
          BOOST_TEST(se.up_proj.data == fe.up_proj.data);
          BOOST_TEST(se.down_proj.data == fe.down_proj.data);
          BOOST_TEST(se.down_proj.cols == c.moe_intermediate_size);
        } else {
          BOOST_TEST(se.gate_proj.data == nullptr);
          BOOST_TEST(se.down_proj.rows == 0);
        }
      }
    }
  }
  BOOST_TEST(held == c.num_experts * c.num_hidden_layers);  // every expert on exactly one rank
  // Ranges: contiguous, covering every expert, sizes differing by one at most.
  for (int32_t ranks : {1, 2, 3, 5, 8})
    for (int32_t r = 0; r < ranks; ++r) {
      const int64_t n = expert_range_begin(8, r + 1, ranks) - expert_range_begin(8, r, ranks);
      BOOST_TEST((n == 8 / ranks || n == 8 / ranks + 1), ranks << " ranks, rank " << r);
    }
  BOOST_TEST(expert_range_begin(8, 0, 3) == 0);
  BOOST_TEST(expert_range_begin(8, 3, 3) == 8);
}

BOOST_AUTO_TEST_SUITE_END()
