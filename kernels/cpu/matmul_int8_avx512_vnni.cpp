// AVX-512 INT8 back-end with AVX512-VNNI: vpdpwssd (matmul_int8_avx512_impl.hpp).
// Standard headers come before the target pragma so no AVX-512 code leaks into shared inline
// functions; everything compiled under the pragma has internal linkage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/matmul_int8.hpp"

// GCC 12 warns inside its own AVX-512 headers (_mm512_setzero_ps & co., GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,bmi,bmi2")
#define TROUPE_INT8_DP(acc, a, b) _mm512_dpwssd_epi32((acc), (a), (b))
#include "kernels/cpu/matmul_int8_avx512_impl.hpp"
#undef TROUPE_INT8_DP
#pragma GCC pop_options

namespace troupe::kernels::cpu {

const quant_backend& int8_backend_avx512_vnni() {
  static const quant_backend b{"avx512-vnni", scratch_floats, run};
  return b;
}

}  // namespace troupe::kernels::cpu
