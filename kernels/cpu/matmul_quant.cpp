// The quantized-weight half of kernels::matmul: the weight checks, the float64 reference and
// dequantized_at (matmul_quant.hpp). The arithmetic runs in the float back-ends.
#include "kernels/cpu/matmul_quant.hpp"

#include <string>
#include <vector>

#include "runtime/core/error.hpp"

namespace troupe::kernels::cpu {
namespace {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

void check_quantized_weight(const weight_ref& w) {
  // The message is built only on failure: matmul() checks every quantized weight on every call.
  auto fail = [&](const std::string& why) {
    throw_error(errc::invalid_argument, "matmul: " + std::string(to_string(w.type)) + " weight [" +
                                            std::to_string(w.rows) + "x" + std::to_string(w.cols) + "]: " + why);
  };
  if (w.type != dtype::i8 && w.type != dtype::u4 && w.type != dtype::f8_e4m3) fail("not a quantized dtype");
  if (!w.scales) fail("no scales (a quantized weight needs weight_scale / weight_scale_inv)");
  if (w.group_rows < 1 || w.group_cols < 1)
    fail("group shape " + std::to_string(w.group_rows) + "x" + std::to_string(w.group_cols) + " is not positive");
  if (w.type == dtype::i8 || w.type == dtype::u4) {
    const std::string kind = w.type == dtype::i8 ? "INT8" : "U4";
    if (w.group_rows != 1) fail(kind + " scales must be per output row (group_rows 1), got " + std::to_string(w.group_rows));
    if (w.group_cols < w.cols && (!is_pow2(w.group_cols) || w.group_cols < 32 || w.group_cols > 4096))
      fail(kind + " group_cols " + std::to_string(w.group_cols) +
           " must be a power of two in [32, 4096] or at least cols (one scale per row)");
    if (w.type == dtype::u4 && w.cols % 16 != 0)
      fail("U4 cols must be a multiple of 16 (codes are packed in blocks of 16 columns)");
    if (w.type == dtype::u4 && !w.zeros) fail("no zeros (a U4 weight needs one zero point per scale)");
  } else if (w.group_cols < w.cols && w.group_cols % 16 != 0) {
    fail("FP8 group_cols " + std::to_string(w.group_cols) + " must be a multiple of 16 or at least cols");
  }
}

void matmul_dequant_reference(const float* x, int64_t n, const weight_ref& w, float* y) {
  check_quantized_weight(w);
  std::vector<double> row(static_cast<size_t>(w.cols));
  for (int64_t j = 0; j < w.rows; ++j) {
    for (int64_t k = 0; k < w.cols; ++k)
      row[static_cast<size_t>(k)] = static_cast<double>(code_value(w, j, k)) * scale_of(w, j, k);
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += static_cast<double>(x[i * w.cols + k]) * row[static_cast<size_t>(k)];
      y[i * w.rows + j] = static_cast<float>(acc);
    }
  }
}

}  // namespace troupe::kernels::cpu

namespace troupe::kernels {

float dequantized_at(const weight_ref& w, int64_t r, int64_t c) {
  // The dtype first: a float weight has no scales or groups to index (group_rows 0).
  if (w.type != dtype::i8 && w.type != dtype::u4 && w.type != dtype::f8_e4m3)
    throw_error(errc::invalid_argument, "dequantized_at: not a quantized weight");
  return cpu::code_value(w, r, c) * cpu::scale_of(w, r, c);
}

}  // namespace troupe::kernels
