// Unpacking GPTQ's and AWQ's int32 words into INT8 codes (packed_int.hpp): blocked transposes by
// the OpenMP team, each block one cache line of the side it reads or writes across.
#include "runtime/quant/packed_int.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/u4_layout.hpp"
#include "runtime/core/error.hpp"

namespace troupe::quant {

namespace {

std::string prefix_of(const std::string& weight_name) {
  constexpr std::string_view suffix = ".weight";
  if (weight_name.size() > suffix.size() && weight_name.compare(weight_name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return weight_name.substr(0, weight_name.size() - suffix.size());
  return weight_name;
}

uint32_t word_at(const uint8_t* base, int64_t i) {
  uint32_t w;
  std::memcpy(&w, base + i * 4, 4);  // safetensors offsets need not be 4-byte aligned
  return w;
}

const tensor_info& need(const weight_files& wf, const std::string& name, dtype type, const std::vector<int64_t>& shape,
                        const std::string& what, std::string& path) {
  const std::string expect = "expected " + std::string(type == dtype::i32 ? "I32" : "F16, BF16 or F32") + " with shape " +
                             shape_string(shape) + ", " + what;
  const tensor_info* t = wf.find(name, path);
  if (!t) throw_error(errc::invalid_checkpoint, path + ": missing tensor '" + name + "'; " + expect);
  const bool type_ok = type == dtype::i32 ? t->type == dtype::i32
                                          : (t->type == dtype::f16 || t->type == dtype::bf16 || t->type == dtype::f32);
  if (!type_ok)
    throw_error(errc::invalid_checkpoint,
                path + ": tensor '" + name + "' has dtype " + std::string(to_string(t->type)) + "; " + expect);
  if (t->shape != shape)
    throw_error(errc::invalid_checkpoint, path + ": tensor '" + name + "' has shape " + shape_string(t->shape) + "; " + expect);
  return *t;
}

// Scales [groups, rows] (F16 / BF16 / F32) as Troupe's float32 [rows, groups].
std::shared_ptr<void> transposed_scales(const tensor_info& scales, int64_t groups, int64_t rows) {
  auto buf = quantized_buffer(static_cast<size_t>(rows * groups) * sizeof(float));
  auto* s = static_cast<float*>(buf.get());
  const std::vector<float> wide = widen_to_f32(scales);
  for (int64_t k = 0; k < groups; ++k)
    for (int64_t r = 0; r < rows; ++r) s[r * groups + k] = wide[static_cast<size_t>(k * rows + r)];
  return buf;
}

// `out` with its ref set: [rows, cols] INT8 codes, one scale per output row and g columns.
quantized_weight with_int8_ref(quantized_weight out, int64_t rows, int64_t cols, int64_t g) {
  out.ref = kernels::weight_ref{out.codes.get(), dtype::i8, rows, cols};
  out.ref.scales = static_cast<const float*>(out.scales.get());
  out.ref.group_rows = 1;
  out.ref.group_cols = static_cast<int32_t>(g);
  return out;
}

// `out` with its ref set as a u4 weight: codes [rows, cols / 2] in kernels.hpp's layout, zeros
// [rows, groups], one scale per output row and g columns.
quantized_weight with_u4_ref(quantized_weight out, int64_t rows, int64_t cols, int64_t g) {
  out = with_int8_ref(std::move(out), rows, cols, g);
  out.ref.type = dtype::u4;
  out.ref.zeros = static_cast<const uint8_t*>(out.zeros.get());
  return out;
}

// Zero points [groups, rows] as u4's uint8 [rows, groups].
std::shared_ptr<void> u4_zeros(const std::vector<int16_t>& zero, int64_t groups, int64_t rows) {
  auto buf = quantized_buffer(static_cast<size_t>(rows * groups));
  auto* z = static_cast<uint8_t*>(buf.get());
  for (int64_t k = 0; k < groups; ++k)
    for (int64_t r = 0; r < rows; ++r) z[r * groups + k] = static_cast<uint8_t>(zero[static_cast<size_t>(k * rows + r)]);
  return buf;
}

// Stores the q of 16 consecutive columns (q[c] for column 16i + c, any bits above the low 4 ignored)
// as u4 block i's word (kernels.hpp's layout).
inline void store_u4_block(const uint32_t* q, uint8_t* dst) {
  uint64_t word = 0;
  for (int c = 0; c < 16; ++c) word |= static_cast<uint64_t>(q[c] & 15u) << (4 * kernels::u4_nibble(c));
  std::memcpy(dst, &word, 8);  // little-endian, as the kernels load it
}

}  // namespace

std::vector<int8_t> int8_codes_of_u4(const kernels::weight_ref& w) {
  std::vector<int8_t> out(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out[static_cast<size_t>(r * w.cols + c)] = static_cast<int8_t>(kernels::u4_code(w, r, c));
  return out;
}

std::vector<std::string> packed_tensor_names(const std::string& weight_name) {
  const std::string p = prefix_of(weight_name);
  return {p + ".qweight", p + ".qzeros", p + ".scales", p + ".g_idx"};
}

bool has_packed_weight(const weight_files& wf, const std::string& weight_name) {
  std::string path;
  return wf.find(prefix_of(weight_name) + ".qweight", path) != nullptr;
}

quantized_weight read_gptq_weight(const weight_files& wf, const std::string& weight_name, int64_t rows, int64_t cols,
                                  const quant_config& q, bool four_bit) {
  const std::vector<std::string> names = packed_tensor_names(weight_name);
  const int bits = q.bits, pack = 32 / bits;
  const uint32_t maxq = (1u << bits) - 1;
  const int64_t g = int8_group_cols(q.group_size, cols);
  const int64_t groups = (cols + g - 1) / g;
  std::string path;
  if (cols % pack != 0 || rows % pack != 0) {
    wf.find(names[0], path);
    throw_error(errc::unsupported, path + ": tensor '" + names[0] + "': a " + std::to_string(rows) + " x " +
                                       std::to_string(cols) + " weight does not pack into " + std::to_string(bits) +
                                       "-bit GPTQ words (both sides must be multiples of " + std::to_string(pack) + ")");
  }
  const tensor_info& qweight = need(wf, names[0], dtype::i32, {cols / pack, rows},
                                    "the packed " + std::to_string(bits) + "-bit codes of '" + weight_name + "'", path);
  const tensor_info& qzeros =
      need(wf, names[1], dtype::i32, {groups, rows / pack}, "the packed zero points of '" + weight_name + "'", path);
  const tensor_info& scales = need(wf, names[2], dtype::f16, {groups, rows}, "the scales of '" + weight_name + "'", path);
  if (const tensor_info* gi = wf.find(names[3], path)) {
    need(wf, names[3], dtype::i32, {cols}, "the group of each input column of '" + weight_name + "'", path);
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t v = static_cast<int32_t>(word_at(gi->data, c));
      if (v != c / g)
        throw_error(errc::unsupported,
                    path + ": tensor '" + names[3] + "' puts input column " + std::to_string(c) + " in group " +
                        std::to_string(v) + ", not " + std::to_string(c / g) + " (column / group_size): act-order " +
                        "(desc_act) GPTQ checkpoints are not supported; quantize with desc_act false");
    }
  }

  // Zero points as integers [groups, rows], then the scales transposed to Troupe's [rows, groups].
  std::vector<int16_t> zero(static_cast<size_t>(groups * rows));
  for (int64_t k = 0; k < groups; ++k)
    for (int64_t r = 0; r < rows; ++r) {
      const uint32_t w = word_at(qzeros.data, k * (rows / pack) + r / pack);
      zero[static_cast<size_t>(k * rows + r)] =
          static_cast<int16_t>(((w >> (bits * (r % pack))) & maxq) + (q.gptq_v1 ? 1 : 0));
    }
  quantized_weight out;
  out.scales = transposed_scales(scales, groups, rows);
  if (four_bit && bits == 4 && cols % 16 == 0) {
    // u4: words 2i and 2i + 1 hold columns 16i .. 16i + 7 and 16i + 8 .. 16i + 15 (nibble j:
    // column 8p + j). Zeros up to 16 (v1's 15 + 1) fit a byte.
    out.zeros = u4_zeros(zero, groups, rows);
    out.codes = quantized_buffer(static_cast<size_t>(rows * cols / 2));
    auto* codes = static_cast<uint8_t*>(std::const_pointer_cast<void>(out.codes).get());
#pragma omp parallel for schedule(static)
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
      const int64_t r1 = std::min(rows, r0 + 16);
      for (int64_t i = 0; i < cols / 16; ++i)
        for (int64_t r = r0; r < r1; ++r) {
          const uint32_t lo = word_at(qweight.data, 2 * i * rows + r), hi = word_at(qweight.data, (2 * i + 1) * rows + r);
          uint32_t q[16];
          for (int j = 0; j < 8; ++j) q[j] = lo >> (4 * j), q[8 + j] = hi >> (4 * j);
          store_u4_block(q, codes + r * (cols / 2) + i * 8);
        }
    }
    return with_u4_ref(std::move(out), rows, cols, g);
  }
  out.codes = quantized_buffer(static_cast<size_t>(rows * cols));
  auto* codes = static_cast<int8_t*>(std::const_pointer_cast<void>(out.codes).get());
  // code - zero for every element; `spill` collects (v + 128) >> 8, non-zero once any v leaves
  // [-128, 127], and a second pass finds the first such element for the message.
  const int64_t words = cols / pack;
  int spill = 0;
#pragma omp parallel for schedule(static) reduction(| : spill)
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t r1 = std::min(rows, r0 + 16);
    for (int64_t p = 0; p < words; ++p) {
      const int16_t* zrow = zero.data() + (p * pack / g) * rows;  // g >= 32 >= pack: one group a word
      for (int64_t r = r0; r < r1; ++r) {
        const uint32_t w = word_at(qweight.data, p * rows + r);
        const int z = zrow[r];
        int8_t* out = codes + r * cols + p * pack;
        if (bits == 8 && z == 128) {  // symmetric 8-bit (Qwen's GPTQ-Int8): q - 128 is q with its top bit flipped
          const uint32_t flipped = w ^ 0x80808080u;
          std::memcpy(out, &flipped, 4);
          continue;
        }
        for (int j = 0; j < pack; ++j) {
          const int v = static_cast<int>((w >> (bits * j)) & maxq) - z;
          spill |= (v + 128) >> 8;
          out[j] = static_cast<int8_t>(v);
        }
      }
    }
  }
  int64_t bad = -1;
  for (int64_t r = 0; spill != 0 && r < rows && bad < 0; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t w = word_at(qweight.data, (c / pack) * rows + r);
      const int v = static_cast<int>((w >> (bits * (c % pack))) & maxq) - zero[static_cast<size_t>((c / g) * rows + r)];
      if (v < -128 || v > 127) {
        bad = r * cols + c;
        break;
      }
    }
  if (const int64_t at = bad; at >= 0) {
    const int64_t r = at / cols, c = at % cols;
    wf.find(names[0], path);
    throw_error(errc::unsupported,
                path + ": tensor '" + names[0] + "': output " + std::to_string(r) + ", input " + std::to_string(c) +
                    " has code - zero outside [-128, 127] (zero point " +
                    std::to_string(zero[static_cast<size_t>((c / g) * rows + r)]) +
                    "): asymmetric 8-bit GPTQ does not fit INT8; Troupe runs 4-bit GPTQ and symmetric 8-bit (sym true)");
  }
  return with_int8_ref(std::move(out), rows, cols, g);
}

quantized_weight read_awq_weight(const weight_files& wf, const std::string& weight_name, int64_t rows, int64_t cols,
                                 const quant_config& q, bool four_bit) {
  const std::vector<std::string> names = packed_tensor_names(weight_name);
  constexpr int pack = 8;
  constexpr int slot[pack] = {0, 4, 1, 5, 2, 6, 3, 7};  // nibble of output 8p + m (AutoAWQ's order)
  const int64_t g = int8_group_cols(q.group_size, cols);
  const int64_t groups = (cols + g - 1) / g, words = rows / pack;
  std::string path;
  if (rows % pack != 0) {
    wf.find(names[0], path);
    throw_error(errc::unsupported, path + ": tensor '" + names[0] + "': a weight of " + std::to_string(rows) +
                                       " outputs does not pack into 4-bit AWQ words (a multiple of 8 is needed)");
  }
  const tensor_info& qweight =
      need(wf, names[0], dtype::i32, {cols, words}, "the packed 4-bit codes of '" + weight_name + "'", path);
  const tensor_info& qzeros =
      need(wf, names[1], dtype::i32, {groups, words}, "the packed zero points of '" + weight_name + "'", path);
  const tensor_info& scales = need(wf, names[2], dtype::f16, {groups, rows}, "the scales of '" + weight_name + "'", path);

  std::vector<int16_t> zero(static_cast<size_t>(groups * rows));
  for (int64_t k = 0; k < groups; ++k)
    for (int64_t r = 0; r < rows; ++r)
      zero[static_cast<size_t>(k * rows + r)] =
          static_cast<int16_t>((word_at(qzeros.data, k * words + r / pack) >> (4 * slot[r % pack])) & 15u);
  quantized_weight out;
  out.scales = transposed_scales(scales, groups, rows);
  if (four_bit && cols % 16 == 0) {
    // u4: for each block of 16 inputs, the 16 words of output group p give the 8 outputs' blocks.
    out.zeros = u4_zeros(zero, groups, rows);
    out.codes = quantized_buffer(static_cast<size_t>(rows * cols / 2));
    auto* codes = static_cast<uint8_t*>(std::const_pointer_cast<void>(out.codes).get());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < cols / 16; ++i)
      for (int64_t p = 0; p < words; ++p) {
        uint32_t wv[16];
        for (int c = 0; c < 16; ++c) wv[c] = word_at(qweight.data, (16 * i + c) * words + p);
        for (int m = 0; m < pack; ++m) {
          uint32_t q[16];
          for (int c = 0; c < 16; ++c) q[c] = wv[c] >> (4 * slot[m]);
          store_u4_block(q, codes + (p * pack + m) * (cols / 2) + i * 8);
        }
      }
    return with_u4_ref(std::move(out), rows, cols, g);
  }
  out.codes = quantized_buffer(static_cast<size_t>(rows * cols));
  auto* codes = static_cast<int8_t*>(std::const_pointer_cast<void>(out.codes).get());
  // 64 inputs at a time: each output row's 64 codes are one cache line.
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < cols; c0 += 64) {
    const int64_t c1 = std::min(cols, c0 + 64);
    for (int64_t p = 0; p < words; ++p)
      for (int64_t c = c0; c < c1; ++c) {
        const uint32_t w = word_at(qweight.data, c * words + p);
        const int16_t* z = zero.data() + (c / g) * rows + p * pack;
        for (int m = 0; m < pack; ++m)
          codes[(p * pack + m) * cols + c] = static_cast<int8_t>(static_cast<int>((w >> (4 * slot[m])) & 15u) - z[m]);
      }
  }
  return with_int8_ref(std::move(out), rows, cols, g);
}

}  // namespace troupe::quant
