// Megatron-LM's split of a Qwen3 checkpoint over a tensor-parallel group: what one rank runs.
//
// Rank r of `size` keeps heads [r*H/size, (r+1)*H/size) of the query heads and of the KV heads
// (rows of q_proj, k_proj, v_proj: "column-parallel"), the same slice of o_proj's input columns
// ("row-parallel": its output is a partial sum), the rows r*I/size.. of gate_proj and up_proj, the
// matching columns of down_proj (every expert alike, by moe_intermediate_size), and a contiguous
// range of lm_head's rows (the vocabulary). Embeddings, norms and the MoE router stay whole.
// Attention and the MLP then need one all-reduce each (after o_proj and down_proj), and each
// rank's logits are its vocabulary range.
//
// A group larger than num_key_value_heads (each KV head's query group spread over several ranks)
// replicates KV heads, as vLLM does: rank r keeps KV head r / (size / KV) only, whose query heads
// are all the rank's; size must then be a multiple of num_key_value_heads.
//
// Expert parallelism (vLLM's --enable-expert-parallel) changes the mixture-of-experts layers only:
// rank r keeps experts [r*E/size, (r+1)*E/size) whole (views, no copies) and none of the others;
// each rank runs the routed tokens' local experts and the MoE all-reduce sums the ranks' weighted
// outputs. Attention, dense MLPs and lm_head split as above.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model/checkpoint.hpp"

namespace troupe {

// How pipeline stages share a step (parallel_runner). `wavefront`: the batch cut into parts, stage
// s on part j while stage s + 1 is on part j - 1, each stage on its share of the threads: what pays
// where stages have memory of their own (NUMA nodes, devices). `in_turn`: the whole batch through
// the stages one after another, each on all the threads: one runner's speed on one shared memory.
// `automatic`: wavefront when the machine has at least as many NUMA nodes as stages.
enum class pipeline_schedule : uint8_t { automatic, wavefront, in_turn };

// `--pipeline-schedule` / model.pipeline_schedule: "auto", "wavefront" or "in_turn"; throws
// invalid_argument naming `option` for anything else.
pipeline_schedule parse_pipeline_schedule(std::string_view text, std::string_view option);
const char* to_string(pipeline_schedule s) noexcept;

struct parallel_config;
// `p.schedule` with automatic resolved (wavefront when the machine has p.pipeline_size NUMA nodes or
// more, else in_turn); in_turn for a single stage.
pipeline_schedule resolved_schedule(const parallel_config& p);

// How a group splits the model. Implicit from a size: plain tensor parallelism.
struct parallel_config {
  parallel_config(int32_t tensor_parallel_size = 1, bool expert_parallel = false, int32_t threads = 0)  // NOLINT: implicit
      : size(tensor_parallel_size), expert_parallel(expert_parallel), threads(threads) {}
  int32_t size = 1;
  // Mixture-of-experts layers: whole experts per rank instead of a slice of every expert.
  bool expert_parallel = false;
  // The step's CPU threads in all (`--threads`), size / threads each rank's (rounded down); 0:
  // OpenMP's count (OMP_NUM_THREADS, else every core the process may use) shared among the ranks.
  int32_t threads = 0;
  // Pipeline parallelism (vLLM's --pipeline-parallel-size): stages of consecutive layers, each a
  // group of `size` ranks on threads of its own (parallel_runner).
  int32_t pipeline_size = 1;
  // The layers of each stage, first to last (vLLM's VLLM_PP_LAYER_PARTITION); empty: vLLM's even
  // split (pipeline_layer_bounds).
  std::vector<int64_t> pipeline_layers;
  pipeline_schedule schedule = pipeline_schedule::automatic;
};

// Where each pipeline stage's layers begin: stages + 1 bounds, bounds[s] .. bounds[s + 1] stage s's
// layers. With `layers` (one count per stage, each at least 1, summing to num_hidden_layers) those;
// otherwise vLLM's default: num_hidden_layers / stages each, the remainder one more each for the
// stages just before the last (which also runs lm_head), e.g. 28 over 3: 9, 10, 9. Throws troupe::error(invalid_argument) naming the
// field for stages < 1, more stages than layers, or a partition of the wrong count or sum.
std::vector<int64_t> pipeline_layer_bounds(const checkpoint& full, int32_t stages, std::span<const int64_t> layers = {});

// `--pipeline-layers` / model.pipeline_layers: comma-separated layer counts ("10,8,10"; empty:
// none). Throws invalid_argument naming `option` for anything else.
std::vector<int64_t> parse_pipeline_layers(std::string_view text, std::string_view option);

// Rank `rank`'s experts with expert parallelism: [expert_range_begin(E, rank, size),
// expert_range_begin(E, rank + 1, size)).
constexpr int64_t expert_range_begin(int64_t num_experts, int32_t rank, int32_t size) {
  return num_experts * rank / size;
}

// Ranks that hold each KV head: size / kv_heads when the group is larger than the model's KV
// heads, else 1.
constexpr int32_t kv_head_replicas(int64_t kv_heads, int32_t size) {
  return kv_heads >= size ? 1 : static_cast<int32_t>(size / kv_heads);
}

// The KV heads rank `rank` keeps: kv_heads_per_rank of them from kv_head_begin. One replicated head
// when the group is larger than the model's KV heads, else an equal share.
constexpr int64_t kv_heads_per_rank(int64_t kv_heads, int32_t size) { return kv_heads >= size ? kv_heads / size : 1; }
constexpr int64_t kv_head_begin(int64_t kv_heads, int32_t rank, int32_t size) {
  return kv_heads >= size ? rank * (kv_heads / size) : rank / kv_head_replicas(kv_heads, size);
}

// The model's config with num_key_value_heads as a group of `size` stores them (each replica
// counted): what sizes the group's KV pools.
inline model_config stored_kv_config(model_config c, int32_t size) {
  c.num_key_value_heads *= kv_head_replicas(c.num_key_value_heads, size);
  return c;
}

// True when `p` splits this model's experts whole: a group of two or more, expert parallelism asked
// for, and at least one mixture-of-experts layer (otherwise the flag changes nothing).
bool splits_experts(const model_config& c, const parallel_config& p);

// Throws troupe::error(unsupported) naming the field when `size` ranks cannot split this model:
// num_attention_heads, intermediate_size or moe_intermediate_size not a multiple of size,
// num_key_value_heads neither a multiple nor a divisor of it, or a quantized weight whose scale groups a split would cut. With expert
// parallelism moe_intermediate_size may be anything and num_experts must be at least size.
// invalid_argument for size < 1, threads < 0, or fewer threads than ranks.
void check_shardable(const checkpoint& full, const parallel_config& p);

// check_shardable, and that the pipeline's stages split this model (pipeline_layer_bounds) with
// threads enough for every stage's ranks: what a runner made with `p` would refuse, up front.
void check_parallel(const checkpoint& full, const parallel_config& p);

// Rank `rank`'s part. Its config has the rank's head counts and MLP widths (num_attention_heads,
// intermediate_size, moe_intermediate_size divided by size; num_key_value_heads kv_heads_per_rank); vocab_size stays
// the model's (token ids are checked against it) and weights.lm_head.rows is the rank's range of
// it (vocab_range). Row slices point into `full`'s memory, which must outlive the shard; column
// slices (o_proj, down_proj) are copies the shard owns. size 1 gives a view of the whole model.
// With expert parallelism moe_intermediate_size stays whole and the experts the rank does not
// hold are empty weight_refs (data null, rows 0): model_runner skips them.
// With first_layer / end_layer (a pipeline stage's layers, end_layer -1: to the last) only those
// layers are sliced; the others stay empty (a stage's runner never reads them).
std::unique_ptr<checkpoint> shard_checkpoint(const checkpoint& full, int32_t rank, const parallel_config& p,
                                             int64_t first_layer = 0, int64_t end_layer = -1);

// Rows [r0, r0 + n) of w: a view into w's memory (its scales and zeros too). r0 must start a scale
// block (check_shardable checks the model's slices).
kernels::weight_ref slice_rows(const kernels::weight_ref& w, int64_t r0, int64_t n);
// Columns [c0, c0 + n) of every row of w, copied (codes, and the scale and zero columns of their
// groups) into memory appended to `owned`; c0 and n on scale-group boundaries (whole 16-column
// words for u4), or any range when one scale covers a row.
kernels::weight_ref copy_columns(const kernels::weight_ref& w, int64_t c0, int64_t n,
                                 std::vector<std::shared_ptr<const void>>& owned);

// The first vocabulary row of rank `rank` (rank == size: vocab_size), on lm_head's scale-group
// boundaries.
int64_t vocab_range_begin(const checkpoint& full, int32_t rank, int32_t size);

}  // namespace troupe
