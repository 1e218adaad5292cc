// A step's batch cut into consecutive parts of about equal token counts: what a pipeline keeps its
// stages busy with (parallel_runner), stage s working on part j while stage s + 1 works on part
// j - 1. A prompt chunk may be cut, its later piece starting where the earlier ends; since a
// sequence's result depends neither on its batch nor on how its prompt is chunked (step.hpp), the
// parts give the whole batch's logits bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/engine/step.hpp"

namespace troupe {

struct micro_batch {
  std::vector<step_sequence> seqs;  // spans into the whole batch's tokens and block tables
  std::vector<size_t> source;       // each entry's index in the whole batch
  int64_t tokens = 0;
};

// At most `parts` parts (fewer when the batch has fewer tokens), in order, their token counts
// within one of each other where cuts allow (a cut lands anywhere in a sequence's tokens). A cut
// sequence's earlier pieces ask for no rows (logits_mode last, hidden, none) or all of theirs
// (all); its last piece keeps its mode. parts < 1 is taken as 1.
std::vector<micro_batch> split_micro_batches(std::span<const step_sequence> batch, int32_t parts);

// The parts' results (results[j] is parts[j]'s) as the whole batch's: each sequence's logits rows
// (its pieces' in order) and hidden row, rows of `vocab` and `hidden` floats.
void merge_micro_results(std::span<const step_sequence> batch, std::span<const micro_batch> parts,
                         std::span<const step_result> results, int64_t vocab, int64_t hidden, step_result& out);

}  // namespace troupe
