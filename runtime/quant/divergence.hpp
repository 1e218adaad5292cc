// How far a quantized model's next-token distributions are from the full-precision run: mean
// KL(P_full || P_quant) over positions and top-1 agreement (docs/quantization.md, "Method").
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::quant {

// KL(softmax(ref) || softmax(test)) in nats, computed in float64 over one row of logits.
double kl_divergence(const float* ref_logits, const float* test_logits, int64_t vocab);

struct divergence {
  double mean_kl = 0;        // nats, mean over rows
  double max_kl = 0;
  double top1_agreement = 0; // fraction of rows whose argmax is the same
  int64_t rows = 0;
};

// ref and test: [rows, vocab] row-major, same shape.
divergence compare_logits(const std::vector<float>& ref, const std::vector<float>& test, int64_t vocab);

}  // namespace troupe::quant
