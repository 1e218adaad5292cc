// The safetensors format: a reader over a memory-mapped file that validates the whole header
// before anyone touches a tensor, and a writer for any dtype (random checkpoints, quantize, tests).
//
// Layout: [u64 little-endian N][N bytes of JSON header][data section]. The header maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets into the data section)
// and may hold "__metadata__": {string: string}.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/dtype.hpp"
#include "runtime/core/mapped_file.hpp"

namespace troupe {

struct tensor_info {
  std::string name;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;     // [] is a scalar
  uint64_t begin = 0;             // byte offsets into the data section
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // into the mapping: valid while the mapping lives
  uint64_t bytes() const noexcept { return end - begin; }
  int64_t numel() const noexcept;
};

// "[151936, 1024]"
std::string shape_string(const std::vector<int64_t>& shape);

// The values of an F32, BF16 or F16 tensor as float32 (exact; the caller checks the dtype): norm
// weights and scales at checkpoint load, LoRA pairs.
std::vector<float> widen_to_f32(const tensor_info& t);

class safetensors_file {
 public:
  // Maps `path` and validates the header: length within the file, JSON syntax, every dtype known,
  // shapes non-negative, data_offsets consistent with dtype x shape, inside the file and not
  // overlapping. Throws troupe::error naming the path (and the tensor): io_error when the file
  // cannot be read, unsupported for a safetensors dtype Troupe does not hold (F64, ...),
  // invalid_checkpoint for everything else. Touches only the header's pages.
  explicit safetensors_file(const std::string& path, residency where = residency::mapped);
  explicit safetensors_file(mapped_file mapping);

  const std::string& path() const noexcept { return map_.path(); }
  const std::vector<tensor_info>& tensors() const noexcept { return tensors_; }  // sorted by name
  const tensor_info* find(std::string_view name) const noexcept;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  uint64_t data_start() const noexcept { return data_start_; }  // 8 + header length

  // Hands the mapping over (tensor data pointers stay valid: a move keeps the address).
  mapped_file release_mapping() && { return std::move(map_); }

 private:
  void parse();
  mapped_file map_;
  std::vector<tensor_info> tensors_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_start_ = 0;
};

// One tensor to write: either `data` (bytes() bytes, row-major) or `fill`, which is called with
// consecutive, element-aligned byte ranges of the tensor and must write exactly `count` bytes.
struct tensor_to_write {
  std::string name;
  dtype type = dtype::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::function<void(uint8_t* out, uint64_t byte_offset, uint64_t count)> fill;
  uint64_t bytes() const noexcept;
};

// Writes a safetensors file as the reference implementation lays it out: header padded with
// spaces to a multiple of 8, tensors ordered by element size (largest first) then name, so every
// tensor starts aligned to its element size and the data section has no holes.
// Throws troupe::error(io_error) naming the path when writing fails (disk full, ...), and
// invalid_argument for a duplicate name or a tensor without data.
void write_safetensors(const std::string& path, const std::vector<tensor_to_write>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace troupe
