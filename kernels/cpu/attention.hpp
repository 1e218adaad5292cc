// The two inner loops of paged_attention (ops.cpp), per instruction set. One arithmetic for every
// back-end, fixed per (query, head) whatever the batch, the chunking or the work split:
//   score[j] = dot16(q, k_j) * scale   dot16: matmul's 16-lane FMA dot product and tree
//                                      (matmul_backend.hpp), the tail lanes as if zero-padded
//   p[j]     = e[j] / sum(e)   e[j] = exp(score[j] - max score) by the fused-multiply-add polynomial
//                              of exp_approx (vec_math.hpp); sum over 16 lanes (j mod 16) and the tree
//   out[i]   = fma(p[j], v_j[i], out[i]) for j = 0, 1, ... in key order, out starting at +0
// so the AVX-512, AVX2 and portable back-ends agree bit for bit.
#pragma once

#include <cstdint>

namespace troupe::kernels::cpu {

// One kv head of one sequence's float pool, read through its block table.
struct attn_kv {
  const float* k = nullptr;
  const float* v = nullptr;
  const int32_t* table = nullptr;
  int64_t block_size = 16;
  int64_t row = 0;     // floats between consecutive slots (n_kv_heads * head_dim)
  int64_t offset = 0;  // this kv head's offset within a slot (g * head_dim)
  int64_t d = 0;       // head_dim
};

// Walks positions j0, j0 + 1, ... through the block table: one division per walk, not per key.
struct kv_cursor {
  const attn_kv* kv;
  int64_t block, slot;
  int64_t at;  // float offset of the current position's slot (+ offset)
  kv_cursor(const attn_kv& a, int64_t pos) : kv(&a), block(pos / a.block_size), slot(pos % a.block_size) {
    at = (static_cast<int64_t>(a.table[block]) * a.block_size + slot) * a.row + a.offset;
  }
  // Call only when the next position exists (its block is in the table).
  void next() {
    if (++slot == kv->block_size) {
      slot = 0;
      ++block;
      at = static_cast<int64_t>(kv->table[block]) * kv->block_size * kv->row + kv->offset;
    } else {
      at += kv->row;
    }
  }
};

struct attn_backend {
  const char* name;
  // s[i * lds + j] = dot16(q[i], k_j) * scale for i < nq, j < limit[i]. limit is nondecreasing;
  // entries up to the next multiple of 8 past limit[i] (< lds) may be written with garbage.
  void (*scores)(const float* const* q, const int64_t* limit, int nq, const attn_kv& kv, float scale, float* s,
                 int64_t lds);
  // s[0 .. n) <- softmax in place (see the top of this file).
  void (*softmax)(float* s, int64_t n);
  // out[i][:] = sum over j < limit[i], in order, of p[i * lds + j] * v_j (fused multiply-adds from +0,
  // or with `resume` from out[i]'s values: a sum over keys split into ranges, each range's kv
  // starting at its first key, chains the same FMAs as one call over all of them).
  void (*weighted_sum)(const float* p, int64_t lds, const int64_t* limit, int nq, const attn_kv& kv,
                       float* const* out, bool resume);
};

const attn_backend& attn_backend_avx512();
const attn_backend& attn_backend_avx2();  // call its functions only where the CPU has AVX2 and FMA
const attn_backend& attn_backend_generic();

// out = silu(gate) * up = gate / (1 + exp(-gate)) * up, exp by the fused sequence of exp_approx
// (vec_math.hpp), the same bits from each: AVX-512 (exp16), AVX2 (exp8), portable.
void silu_mul_avx512(const float* gate, const float* up, int64_t count, float* out);
void silu_mul_avx2(const float* gate, const float* up, int64_t count, float* out);
void silu_mul_generic(const float* gate, const float* up, int64_t count, float* out);

// out[0 .. n) = the E4M3 codes' values times scale: kv_quant.hpp's dequantize_kv_row for an FP8
// row, the same bits, by F16C (AVX2 + F16C CPUs, AVX-512 ones too).
void dequantize_fp8_avx2(const uint8_t* codes, float scale, int64_t n, float* out);

}  // namespace troupe::kernels::cpu
