// Unpacking GPTQ's int32 words into INT8 codes (gptq.hpp): a blocked transpose, 16 output rows
// (one cache line of each qweight row) at a time, by the OpenMP team.
#include "runtime/quant/gptq.hpp"

#include <algorithm>
#include <cstring>

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

}  // namespace

std::vector<std::string> gptq_tensor_names(const std::string& weight_name) {
  const std::string p = prefix_of(weight_name);
  return {p + ".qweight", p + ".qzeros", p + ".scales", p + ".g_idx"};
}

bool has_gptq_weight(const weight_files& wf, const std::string& weight_name) {
  std::string path;
  return wf.find(prefix_of(weight_name) + ".qweight", path) != nullptr;
}

quantized_weight read_gptq_weight(const weight_files& wf, const std::string& weight_name, int64_t rows, int64_t cols,
                                  const quant_config& q, residency where) {
  const std::vector<std::string> names = gptq_tensor_names(weight_name);
  const int bits = q.bits, pack = 32 / bits;
  const uint32_t maxq = (1u << bits) - 1;
  const int64_t g = q.group_size == 0 || q.group_size >= cols ? std::max<int64_t>(cols, 1) : q.group_size;
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
  out.scales = quantized_buffer(static_cast<size_t>(rows * groups) * sizeof(float), where);
  auto* s = static_cast<float*>(std::const_pointer_cast<void>(out.scales).get());
  const std::vector<float> wide = widen_to_f32(scales);
  for (int64_t k = 0; k < groups; ++k)
    for (int64_t r = 0; r < rows; ++r) s[r * groups + k] = wide[static_cast<size_t>(k * rows + r)];

  out.codes = quantized_buffer(static_cast<size_t>(rows * cols), where);
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
  out.ref = kernels::weight_ref{codes, dtype::i8, rows, cols};
  out.ref.scales = s;
  out.ref.group_rows = 1;
  out.ref.group_cols = static_cast<int32_t>(g);
  return out;
}

}  // namespace troupe::quant
