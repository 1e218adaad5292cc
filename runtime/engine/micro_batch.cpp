#include "runtime/engine/micro_batch.hpp"

#include <algorithm>

#include "runtime/core/error.hpp"

namespace troupe {

std::vector<micro_batch> split_micro_batches(std::span<const step_sequence> batch, int32_t parts) {
  int64_t total = 0;
  for (const auto& sq : batch) total += static_cast<int64_t>(sq.tokens.size());
  const int64_t m = std::max<int64_t>(1, std::min<int64_t>(parts, total));
  std::vector<micro_batch> out(static_cast<size_t>(m));
  // Part j holds the tokens [total * j / m, total * (j + 1) / m) of the batch's tokens in order.
  int64_t at = 0;  // tokens placed so far
  size_t j = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const auto& sq = batch[s];
    const auto n = static_cast<int64_t>(sq.tokens.size());
    int64_t done = 0;
    while (done < n || n == 0) {
      while (j + 1 < out.size() && at >= total * static_cast<int64_t>(j + 1) / m) ++j;
      const int64_t end = total * static_cast<int64_t>(j + 1) / m;
      const int64_t take = n == 0 ? 0 : std::min(n - done, std::max<int64_t>(end - at, 1));
      step_sequence piece = sq;
      piece.tokens = sq.tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(take));
      piece.start_pos = sq.start_pos + static_cast<int32_t>(done);
      if (done + take < n) piece.logits = sq.logits == logits_mode::all ? logits_mode::all : logits_mode::none;
      out[j].seqs.push_back(piece);
      out[j].source.push_back(s);
      out[j].tokens += take;
      done += take;
      at += take;
      if (n == 0) break;  // an empty sequence (refused by the step's checks) stays whole
    }
  }
  std::erase_if(out, [](const micro_batch& p) { return p.seqs.empty(); });
  return out;
}

void merge_micro_results(std::span<const step_sequence> batch, std::span<const micro_batch> parts,
                         std::span<const step_result> results, int64_t vocab, int64_t hidden, step_result& out) {
  TROUPE_ASSERT(parts.size() == results.size());
  out.vocab_size = vocab;
  out.hidden_size = hidden;
  out.first_row.assign(batch.size(), -1);
  out.num_rows.assign(batch.size(), 0);
  out.hidden_row.assign(batch.size(), -1);
  int64_t rows = 0, hidden_rows = 0;
  for (size_t j = 0; j < parts.size(); ++j) {
    for (size_t e = 0; e < parts[j].seqs.size(); ++e) rows += results[j].num_rows[e];
    for (int64_t h : results[j].hidden_row) hidden_rows += h >= 0 ? 1 : 0;
  }
  out.logits.resize(static_cast<size_t>(rows * vocab));
  out.hidden.resize(static_cast<size_t>(hidden_rows * hidden));
  int64_t row = 0, hrow = 0;
  for (size_t j = 0; j < parts.size(); ++j) {
    const step_result& r = results[j];
    for (size_t e = 0; e < parts[j].seqs.size(); ++e) {
      const size_t s = parts[j].source[e];
      if (out.first_row[s] < 0) out.first_row[s] = row;
      const int64_t n = r.num_rows[e];
      TROUPE_ASSERT(r.vocab_size == vocab || n == 0);
      if (n > 0) std::copy_n(r.logits.data() + r.first_row[e] * vocab, n * vocab, out.logits.data() + row * vocab);
      out.num_rows[s] += n;
      row += n;
      if (r.hidden_row[e] >= 0) {
        std::copy_n(r.hidden.data() + r.hidden_row[e] * hidden, hidden, out.hidden.data() + hrow * hidden);
        out.hidden_row[s] = hrow++;
      }
    }
  }
}

}  // namespace troupe
