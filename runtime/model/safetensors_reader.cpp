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

// One header entry as the JSON states it, before validation.
struct raw_entry {
  std::string name;
  bool is_object = true;
  bool has_dtype = false, dtype_ok = true;
  std::string dtype;
  bool has_shape = false, shape_ok = true;
  std::vector<uint64_t> shape;
  bool has_offsets = false, offsets_ok = true;
  std::vector<uint64_t> offsets;
};

// Collects the header's entries straight from the token stream: a DOM of a MoE header (tens of
// thousands of tensors, megabytes of JSON) costs ~5x more in allocations than the parse itself.
class header_reader : public nlohmann::json_sax<json> {
 public:
  std::vector<raw_entry> entries;
  std::map<std::string, std::string> metadata;
  std::string problem;  // the first structural problem found, if any

  bool null() override { return scalar(false, 0, false, nullptr); }
  bool boolean(bool) override { return scalar(false, 0, false, nullptr); }
  bool number_integer(number_integer_t v) override {
    return v >= 0 ? scalar(true, static_cast<uint64_t>(v), false, nullptr) : scalar(false, 0, false, nullptr);
  }
  bool number_unsigned(number_unsigned_t v) override { return scalar(true, v, false, nullptr); }
  bool number_float(number_float_t, const string_t&) override { return scalar(false, 0, false, nullptr); }
  bool string(string_t& v) override { return scalar(false, 0, true, &v); }
  bool binary(binary_t&) override { return scalar(false, 0, false, nullptr); }

  bool start_object(std::size_t) override {
    if (stack_.empty()) return push(top);
    switch (stack_.back()) {
      case top:
        if (top_key_ == "__metadata__") return push(meta);
        new_entry(true);
        return push(tensor);
      default:
        mark_bad();
        return push(skip);
    }
  }
  bool end_object() override { return pop(); }
  bool start_array(std::size_t) override {
    if (stack_.empty()) return fail("the header is not a JSON object");
    switch (stack_.back()) {
      case top:
        if (top_key_ == "__metadata__") return fail("__metadata__ is not an object of strings");
        new_entry(false);
        return push(skip);
      case tensor:
        if (field_ == "shape") {
          entries.back().has_shape = true;
          return push(shape);
        }
        if (field_ == "data_offsets") {
          entries.back().has_offsets = true;
          return push(offsets);
        }
        mark_bad();
        return push(skip);
      default:
        mark_bad();
        return push(skip);
    }
  }
  bool end_array() override { return pop(); }
  bool key(string_t& k) override {
    if (stack_.back() == top) top_key_ = k;
    else if (stack_.back() == tensor) field_ = k;
    else if (stack_.back() == meta) meta_key_ = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    if (problem.empty()) problem = std::string("the header is not valid JSON (") + e.what() + ")";
    return false;
  }

 private:
  enum context { top, tensor, meta, shape, offsets, skip };

  void new_entry(bool is_object) {
    entries.emplace_back();
    entries.back().name = top_key_;
    entries.back().is_object = is_object;
  }
  bool push(context c) {
    stack_.push_back(c);
    return true;
  }
  bool pop() {
    stack_.pop_back();
    return true;
  }
  bool fail(const std::string& what) {
    if (problem.empty()) problem = what;
    return false;
  }
  // A value of the wrong kind inside a tensor entry's field.
  void mark_bad() {
    if (stack_.back() == meta) {
      fail("__metadata__ entry '" + meta_key_ + "' is not a string");
      return;
    }
    if (entries.empty() || stack_.back() == skip) return;
    raw_entry& e = entries.back();
    context c = stack_.back();
    if (c == shape || (c == tensor && field_ == "shape")) e.has_shape = true, e.shape_ok = false;
    if (c == offsets || (c == tensor && field_ == "data_offsets")) e.has_offsets = true, e.offsets_ok = false;
    if (c == tensor && field_ == "dtype") e.has_dtype = true, e.dtype_ok = false;
  }
  bool scalar(bool is_unsigned, uint64_t u, bool is_string, string_t* s) {
    if (stack_.empty()) return fail("the header is not a JSON object");
    switch (stack_.back()) {
      case top:
        if (top_key_ == "__metadata__") {
          if (!is_string && s == nullptr && !is_unsigned) return true;  // tolerate null
          return fail("__metadata__ is not an object of strings");
        }
        new_entry(false);
        return true;
      case tensor:
        if (field_ == "dtype") {
          entries.back().has_dtype = true;
          if (is_string) entries.back().dtype = *s;
          else entries.back().dtype_ok = false;
        } else {
          mark_bad();
        }
        return true;
      case meta:
        if (!is_string) return fail("__metadata__ entry '" + meta_key_ + "' is not a string");
        metadata[meta_key_] = *s;
        return true;
      case shape:
      case offsets: {
        raw_entry& e = entries.back();
        if (!is_unsigned) (stack_.back() == shape ? e.shape_ok : e.offsets_ok) = false;
        else (stack_.back() == shape ? e.shape : e.offsets).push_back(u);
        return true;
      }
      case skip:
        return true;
    }
    return true;
  }

  std::vector<context> stack_;
  std::string top_key_, field_, meta_key_;
};

}  // namespace

int64_t tensor_info::numel() const noexcept {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> widen_to_f32(const tensor_info& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.type == dtype::f32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t v;
      std::memcpy(&v, t.data + 2 * i, 2);
      out[i] = t.type == dtype::bf16 ? bf16_to_f32(v) : f16_to_f32(v);
    }
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

safetensors_file::safetensors_file(const std::string& path, residency where) : map_(path, where) { parse(); }

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
  header_reader header;
  bool parsed = json::sax_parse(text, text + n, &header);
  if (!parsed || !header.problem.empty())
    corrupt(path, header.problem.empty() ? "the header is not valid JSON" : header.problem);
  metadata_ = std::move(header.metadata);

  tensors_.reserve(header.entries.size());
  for (raw_entry& r : header.entries) {
    const std::string where = "tensor '" + r.name + "'";
    if (!r.is_object || !r.has_dtype || !r.has_shape || !r.has_offsets)
      corrupt(path, where + " is not an object with dtype, shape and data_offsets");
    if (!r.dtype_ok) corrupt(path, where + " has a dtype that is not a string");
    tensor_info t;
    t.name = std::move(r.name);
    auto type = dtype_from_safetensors(r.dtype);
    if (!type) {
      if (is_other_safetensors_dtype(r.dtype))
        throw_error(errc::unsupported, path + ": " + where + " has dtype " + r.dtype +
                                           ", which Troupe does not support; expected one of "
                                           "F32, F16, BF16, I8, U8, F8_E4M3, I32, I64");
      throw_error(errc::invalid_checkpoint,
                  path + ": " + where + " has unknown dtype \"" + r.dtype +
                      "\"; expected a safetensors dtype (F32, F16, BF16, ...)");
    }
    t.type = *type;

    if (!r.shape_ok) corrupt(path, where + " has a shape that is not a list of non-negative integers");
    uint64_t numel = 1;
    bool overflow = false;
    for (uint64_t dim : r.shape) {
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim) overflow = true;
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t esize = dtype_size(t.type);
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize)
      corrupt(path, where + " has shape " + shape_string(t.shape) + ", too large to address");

    if (!r.offsets_ok || r.offsets.size() != 2)
      corrupt(path, where + " has data_offsets that are not [begin, end] as non-negative integers");
    t.begin = r.offsets[0];
    t.end = r.offsets[1];
    auto offsets = [&] {  // only for messages
      std::string o = std::to_string(t.begin);
      return o.insert(0, 1, '[') + ", " + std::to_string(t.end) + "]";
    };
    if (t.end < t.begin) corrupt(path, where + " has data_offsets " + offsets() + " with end before begin");
    const uint64_t expected = numel * esize;
    if (t.end - t.begin != expected)
      corrupt(path, where + " has data_offsets " + offsets() + " spanning " +
                        std::to_string(t.end - t.begin) + " bytes; expected " +
                        std::to_string(expected) + " bytes for " + r.dtype + " " + shape_string(t.shape));
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
  std::sort(tensors_.begin(), tensors_.end(),
            [](const tensor_info& a, const tensor_info& b) { return a.name < b.name; });
  for (size_t i = 1; i < tensors_.size(); ++i)
    if (tensors_[i].name == tensors_[i - 1].name)
      corrupt(path, "tensor '" + tensors_[i].name + "' appears twice");

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

}

}  // namespace troupe
