// Validating safetensors reader: every offset is checked against the mapping before a pointer
// into it is formed, so a corrupt or truncated file is an error, never a wild read.
#include <algorithm>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"

namespace troupe {

using json = nlohmann::json;

namespace {

// The reference implementation's limit: a larger header is a corrupt length, not a real model.
constexpr uint64_t max_header_bytes = 100'000'000;

// Spellings of the safetensors format that Troupe has no dtype for (rejected as unsupported,
// distinct from a spelling that is not safetensors at all).
bool is_other_safetensors_dtype(std::string_view s) {
  static constexpr std::string_view names[] = {"BOOL", "F64", "I16", "U16", "U32", "U64",
                                               "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                               "F4", "C64"};
  return std::find(std::begin(names), std::end(names), s) != std::end(names);
}

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw_error(errc::invalid_checkpoint, path + ": corrupt safetensors header: " + what);
}

}  // namespace

int64_t tensor_info::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

safetensors_file::safetensors_file(const std::string& path) : map_(path) { parse(); }

safetensors_file::safetensors_file(mapped_file mapping) : map_(std::move(mapping)) { parse(); }

const tensor_info* safetensors_file::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const tensor_info& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

void safetensors_file::parse() {
  const std::string& path = map_.path();
  const uint64_t file_size = map_.size();
  if (file_size < 8)
    throw_error(errc::invalid_checkpoint,
                path + ": truncated: the file has " + std::to_string(file_size) +
                    " bytes; expected at least the 8-byte header length of a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | map_.data()[i];  // little-endian on any host
  if (n > file_size - 8)
    corrupt(path, "header length " + std::to_string(n) + " exceeds the file size " +
                      std::to_string(file_size) + " (expected at most " +
                      std::to_string(file_size - 8) + "; truncated file?)");
  if (n > max_header_bytes)
    corrupt(path, "header length " + std::to_string(n) + " is above the limit of " +
                      std::to_string(max_header_bytes) + " bytes");
  if (n < 2) corrupt(path, "header length " + std::to_string(n) + " is too small for a JSON object");
  data_start_ = 8 + n;
  const uint64_t data_size = file_size - data_start_;

  const char* text = reinterpret_cast<const char*>(map_.data() + 8);
  json header;
  try {
    header = json::parse(text, text + n);
  } catch (const json::parse_error& e) {
    corrupt(path, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) corrupt(path, "the header is not a JSON object");

  tensors_.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object()) corrupt(path, "__metadata__ is not an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          corrupt(path, "__metadata__ entry '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      corrupt(path, where + " is not an object with dtype, shape and data_offsets");

    tensor_info t;
    t.name = name;
    const json& dt = v["dtype"];
    if (!dt.is_string()) corrupt(path, where + " has a dtype that is not a string");
    const std::string dname = dt.get<std::string>();
    auto type = dtype_from_safetensors(dname);
    if (!type) {
      if (is_other_safetensors_dtype(dname))
        throw_error(errc::unsupported, path + ": " + where + " has dtype " + dname +
                                           ", which Troupe does not support; expected one of "
                                           "F32, F16, BF16, I8, U8, F8_E4M3, I32, I64");
      throw_error(errc::invalid_checkpoint,
                  path + ": " + where + " has unknown dtype \"" + dname +
                      "\"; expected a safetensors dtype (F32, F16, BF16, ...)");
    }
    t.type = *type;

    const json& shape = v["shape"];
    if (!shape.is_array()) corrupt(path, where + " has a shape that is not a list");
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned())
        corrupt(path, where + " has shape " + shape.dump() + "; expected non-negative integers");
      uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t esize = dtype_size(t.type);
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize)
      corrupt(path, where + " has shape " + shape.dump() + ", too large to address");

    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      corrupt(path, where + " has data_offsets " + off.dump() +
                        "; expected [begin, end] as non-negative integers");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.end < t.begin)
      corrupt(path, where + " has data_offsets " + off.dump() + " with end before begin");
    const uint64_t expected = numel * esize;
    if (t.end - t.begin != expected)
      corrupt(path, where + " has data_offsets " + off.dump() + " spanning " +
                        std::to_string(t.end - t.begin) + " bytes; expected " +
                        std::to_string(expected) + " bytes for " + dname + " " + shape.dump());
    if (t.end > data_size)
      throw_error(errc::invalid_checkpoint,
                  path + ": truncated: " + where + " ends at byte " + std::to_string(t.end) +
                      " of the data section, but the file holds only " +
                      std::to_string(data_size) + " data bytes (expected a file of at least " +
                      std::to_string(data_start_ + t.end) + " bytes, found " +
                      std::to_string(file_size) + ")");
    t.data = map_.data() + data_start_ + t.begin;
    tensors_.push_back(std::move(t));
  }

  // Overlapping tensors would alias each other's weights: the format forbids them.
  std::vector<const tensor_info*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const auto& t : tensors_)
    if (t.bytes() > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const tensor_info* a, const tensor_info* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      corrupt(path, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                        "' overlap in the data section");

  // nlohmann's object is a std::map: the tensors arrive sorted by name already.
  TROUPE_ASSERT(std::is_sorted(tensors_.begin(), tensors_.end(),
                               [](const tensor_info& a, const tensor_info& b) { return a.name < b.name; }));
}

}  // namespace troupe
