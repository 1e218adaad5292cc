// The kernel interface every backend implements (kernels/cpu today, kernels/cuda beside it).
// Activations are float32; weights keep their checkpoint dtype and are widened inside kernels.
//
// Batch invariance (architecture.md): a row's result never depends on which other rows share
// the call, how many there are, or how threads split the work. Every kernel that reduces
// (matmul, norms, attention) fixes its reduction order per output element.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/core/dtype.hpp"

namespace troupe::kernels {

// A linear layer's weight as stored in the checkpoint: [rows = out_features, cols = in_features],
// row-major, contiguous. Memory-mapped from the checkpoint; never copied by default.
struct weight_ref {
  const void* data = nullptr;
  dtype type = dtype::f32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes() const noexcept { return type == dtype::u4 ? cols / 2 : cols * static_cast<int64_t>(dtype_size(type)); }
  size_t bytes() const noexcept { return static_cast<size_t>(rows * row_bytes()); }

  // Quantized weights (type i8, u4 or f8_e4m3; docs/quantization.md): `data` holds the codes and
  //   w[r][c] = code[r][c] * scales[(r / group_rows) * scale_cols() + c / group_cols]
  // with scales row-major [ceil(rows / group_rows), scale_cols()]. INT8: group_rows 1 (per output
  // channel, group_cols inputs per scale); FP8: 128 x 128 blocks (weight_scale_inv).
  // u4 (4-bit GPTQ / AWQ): group_rows 1 as INT8, cols a multiple of 16, and
  //   code[r][c] = q[r][c] - zeros[r * scale_cols() + c / group_cols]
  // where row r's cols / 2 bytes are one little-endian 64-bit word per block of 16 columns, its
  // nibble u4_nibble(c) holding q of column c (kernels/u4_layout.hpp): the even columns in the
  // low 32 bits, the odd ones in the high 32, so that a SIMD lane l of a broadcast word finds its
  // column's q at bit 4 * (l / 2) of its own dword. The values are exactly those of the INT8
  // codes q - zero with the same scales, so the kernels give the INT8 weight's bits with half
  // its bytes.
  const float* scales = nullptr;
  int32_t group_rows = 0;
  int32_t group_cols = 0;
  const uint8_t* zeros = nullptr;  // u4 only
  int64_t scale_rows() const noexcept { return group_rows > 0 ? (rows + group_rows - 1) / group_rows : 0; }
  int64_t scale_cols() const noexcept { return group_cols > 0 ? (cols + group_cols - 1) / group_cols : 0; }
  size_t scale_bytes() const noexcept { return static_cast<size_t>(scale_rows() * scale_cols()) * sizeof(float); }
};

// y = x · wᵀ
//   x: [n, w.cols] float32 row-major
//   y: [n, w.rows] float32 row-major
// Weight dtypes: f32, f16, bf16. Each y[i][j] is a dot product whose summation order depends only
// on w.cols and the instruction set chosen at start-up (not on n, i, or the thread count).
// Quantized weights (i8, f8_e4m3 with scales, kernels/cpu/matmul_quant.hpp) take the same path:
// each code widens to the float32 value * scale, then the same dot product.
void matmul(const float* x, int64_t n, const weight_ref& w, float* y);

// The arithmetic a matmul of BF16 weights uses; the engine passes it down per call
// (model_runner_options::compute, `--compute-dtype`). Other weight dtypes ignore it.
//   f32:  the exact path above (x in float32, weights widened exactly): the default. Where the CPU
//         has AMX-BF16, BF16 weights take the AMX tiles instead, x split exactly into three bf16
//         parts (f32_arithmetic() below: fp32 accuracy, other bits; TROUPE_ISA=avx512 keeps FMA).
//   bf16: each x row is rounded to bf16 (f32_to_bf16: nearest even, once per call) and multiplied with
//         the bf16 weights as AVX512_BF16 vdpbf16ps does: per 32-bit lane l of a 16-lane dot
//         product, for each 32-column block b in order,
//           acc[l] = ftz(acc[l] + x[32b+2l+1] * w[32b+2l+1]);  acc[l] = ftz(acc[l] + x[32b+2l] * w[32b+2l])
//         (each product exact, each add rounded to nearest even, bf16 subnormal inputs read as 0,
//         subnormal sums flushed to 0; the last block zero-padded), then matmul's 16-lane tree.
//         These back-ends give the same bits (a portable emulation where the CPU lacks
//         AVX512_BF16), and the batch-invariance contract holds as for f32. Costs the bf16
//         precision of the activations; faster only where vdpbf16ps outruns the fp32 FMA
//         (Zen 4 yes, the dev machine's Intel cores no: docs/kernels.md, "bf16 compute").
//         Where the CPU has AMX-BF16 (Intel Sapphire Rapids and later) the mode runs on the AMX
//         tiles instead (matmul_bf16_isa() == "amx"; TROUPE_ISA=avx512 keeps vdpbf16ps): the same
//         bf16 activations, products summed by the tile unit's own order (other bits than
//         vdpbf16ps, within fp32 accumulation error of float64), still batch and thread invariant.
enum class compute_dtype : uint8_t { f32, bf16 };
void matmul(const float* x, int64_t n, const weight_ref& w, float* y, compute_dtype compute);

// Several products of one x in one parallel region: y = x · wᵀ for each (w, y) of `outs`, each
// the same bits as its own matmul() call. The engine's q/k/v and gate/up projections go through
// it: one fork and join of the threads instead of three or two, and the small matrices' row units
// share out over the threads with the large ones' instead of each leaving a thread idle at its end
// (decode is bound by streaming the weights, and every join drains that stream). Every w has the
// same cols; at most max_matmul_outs of them.
struct matmul_out {
  weight_ref w;
  float* y = nullptr;
};
inline constexpr size_t max_matmul_outs = 8;
void matmul(const float* x, int64_t n, std::span<const matmul_out> outs, compute_dtype compute);

// The vdpbf16ps arithmetic above in scalar C++ (every back-end must reproduce it bit for bit);
// the tests' reference for matmul(..., compute_dtype::bf16) on BF16 weights.
void matmul_bf16_reference(const float* x, int64_t n, const weight_ref& w, float* y);

// Element (r, c) of a quantized weight (i8 / u4 / f8_e4m3) in float32: value(code) * scale, rounded once,
// as the weight_ref comment defines it (the weight the dequantised arithmetic multiplies by).
// Throws troupe::error(invalid_argument) for a float weight.
float dequantized_at(const weight_ref& w, int64_t r, int64_t c);

// The portable scalar version with the same contract; the tests' reference for matmul().
void matmul_reference(const float* x, int64_t n, const weight_ref& w, float* y);

// Name of the instruction set matmul() dispatches to on this machine ("avx512", "avx2", ...).
const char* matmul_isa() noexcept;
// The back-end of compute_dtype::bf16 on this machine: "amx" (the AMX tiles: their own bits),
// "avx512_bf16" (vdpbf16ps) or "portable" (vdpbf16ps's bits in scalar code, slow).
const char* matmul_bf16_isa() noexcept;
// The bits compute_dtype::bf16 gives here: "amx" on the AMX tiles, else "vdpbf16ps" (the AVX512_BF16
// back-end and the portable one agree). The prefix cache keys bf16-mode K/V by it.
const char* bf16_arithmetic() noexcept;

// The bits compute_dtype::f32 gives BF16 weights here: "fma" (the exact FMA contract above, the
// same on every machine: AVX-512, AVX2, portable) or "amx" where the CPU has AMX-BF16 and
// TROUPE_ISA is auto or amx: each x split exactly into three bf16 parts (hi + mid + lo = x), each
// part's products with the bf16 weights exact in fp32 and summed by the tile unit, block by block
// (32 columns: w * hi, w * mid, w * lo into one fp32 accumulator). fp32 accuracy (within the FMA
// path's float64 bound, tested) at several times its speed where the matmul is compute-bound;
// its own bits, still batch, chunk and thread invariant. F32 / F16 / quantized weights always take
// the FMA path. The prefix cache keys f32 K/V by it.
const char* f32_arithmetic() noexcept;

// The arithmetic of quantized (INT8, FP8) weights (kernels/cpu/matmul_quant.hpp): "dequant", float32
// on code * scale through the float dot product, on every back-end. Earlier versions ran AVX-512 and
// portable back-ends in a "grouped" arithmetic (other bits); the name goes into the prefix cache's
// keys (quant::kernel_arithmetic) so that KV blocks computed either way are never mixed.
const char* quant_arithmetic() noexcept;

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]   for each of n rows of length dim.
// x and out may alias.
void rmsnorm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* out);

// Rotary embedding, "rotate half" layout, in place on x: [n_tokens, n_heads, head_dim];
// token t is at position positions[t]. inv_freq: [head_dim / 2]. cos and sin are multiplied by
// `scale` (YaRN's attention factor; 1 for plain RoPE).
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq, float scale);

// out[i] = silu(gate[i]) * up[i] for i < count. out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t count, float* out);

// One layer of the paged KV cache: K and V each [num_blocks, block_size, n_kv_heads, head_dim],
// float32. Token p of a sequence lives in block block_table[p / block_size], slot p % block_size.
struct paged_kv_layer {
  float* k = nullptr;
  float* v = nullptr;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  // A quantized pool (type i8 or f8_e4m3; k and v are null then): codes in k's layout, one
  // float32 scale per (block, slot, kv head): value = code * scale (docs/quantization.md).
  dtype type = dtype::f32;
  uint8_t* k_codes = nullptr;
  uint8_t* v_codes = nullptr;
  float* k_scales = nullptr;  // [num_blocks, block_size, n_kv_heads]
  float* v_scales = nullptr;
};

// Stores k, v: [n, n_kv_heads, head_dim] for positions start_pos .. start_pos + n - 1. A quantized
// pool stores each (token, head) row as codes with scale max|row| / 127 (INT8) or / 448 (FP8).
void kv_write(const paged_kv_layer& kv, const int32_t* block_table, int32_t start_pos, int64_t n,
              const float* k, const float* v);

// Causal attention of one sequence's chunk through its block table.
//   q:   [n_q, n_heads, head_dim]; query t sits at position start_pos + t and sees keys 0..start_pos+t
//   out: [n_q, n_heads, head_dim]
// Query head h reads kv head h / (n_heads / n_kv_heads). Each (query, head) is computed alone in
// key order, so chunking a prompt differently gives bit-identical outputs. A quantized pool gives
// exactly the float result on its dequantised values (code * scale).
void paged_attention(const float* q, int64_t n_q, int64_t n_heads, int32_t start_pos,
                     const paged_kv_layer& kv, const int32_t* block_table, float scale, float* out);

// Widen n rows of a [vocab, dim] table to float32: out[r] = table[ids[r]].
void embedding(const weight_ref& table, const int32_t* ids, int64_t n, float* out);

}  // namespace troupe::kernels
