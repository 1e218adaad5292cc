// safetensors writer: streams each tensor through a bounded buffer, so writing a model never
// needs the model in memory, and reports every failed write as an error naming the file.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <set>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"

namespace troupe {

using json = nlohmann::json;

namespace {

constexpr uint64_t chunk_bytes = uint64_t{16} << 20;  // a multiple of every element size

// Writes go out in whole 16 MB pieces at offsets that are multiples of 16 MB (the last one
// shorter): the page cache then holds the file in 2 MB folios, which a mapping of it maps with 2 MB
// pages. Unaligned writes (the header, then each tensor on its own) left ~40% of a written model in
// smaller folios, which mapped_file then reads back once at the first load (docs/engine.md,
// "Weights in the page cache").
class output_file {
 public:
  explicit output_file(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw_error(errc::io_error, "cannot create " + path + ": " + std::strerror(errno));
    pending_ = std::make_unique_for_overwrite<uint8_t[]>(chunk_bytes);
  }
  ~output_file() {
    if (fd_ >= 0) ::close(fd_);
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  void write(const void* p, uint64_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    produce(n, [b](uint8_t* out, uint64_t at, uint64_t count) { std::memcpy(out, b + at, count); });
  }
  // n bytes that `fill(out, at, count)` writes straight into the pending piece, in consecutive
  // ranges (at: bytes of the n before this range): a fill-made tensor is not copied again.
  template <class Fill>
  void produce(uint64_t n, Fill&& fill) {
    for (uint64_t at = 0; at < n;) {
      const uint64_t take = std::min<uint64_t>(n - at, chunk_bytes - used_);
      fill(pending_.get() + used_, at, take);
      used_ += take;
      at += take;
      if (used_ == chunk_bytes) flush();
    }
  }
  void close() {
    flush();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0)
      throw_error(errc::io_error, "cannot write " + path_ + ": " + std::strerror(errno));
  }

 private:
  void flush() {
    const uint8_t* b = pending_.get();
    uint64_t n = used_;
    while (n > 0) {
      ssize_t w = ::write(fd_, b, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        throw_error(errc::io_error, "cannot write " + path_ + ": " +
                                        (w < 0 ? std::strerror(errno) : "no progress"));
      b += w;
      n -= static_cast<uint64_t>(w);
    }
    used_ = 0;
  }

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<uint8_t[]> pending_;  // the piece being gathered: used_ bytes so far
  uint64_t used_ = 0;
};

}  // namespace

uint64_t tensor_to_write::bytes() const noexcept {
  uint64_t n = dtype_size(type);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void write_safetensors(const std::string& path, const std::vector<tensor_to_write>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const tensor_to_write*> order;
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second || t.name == "__metadata__")
      throw_error(errc::invalid_argument, path + ": tensor name '" + t.name + "' used twice or reserved");
    if (!t.data && !t.fill && t.bytes() > 0)
      throw_error(errc::invalid_argument, path + ": tensor '" + t.name + "' has neither data nor fill");
    for (int64_t d : t.shape)
      if (d < 0) throw_error(errc::invalid_argument, path + ": tensor '" + t.name + "' has a negative dimension");
    order.push_back(&t);
  }
  // Largest element first keeps every tensor aligned to its element size without padding holes
  // (the reference loader rejects holes); the name breaks ties so the layout is reproducible.
  std::stable_sort(order.begin(), order.end(), [](const tensor_to_write* a, const tensor_to_write* b) {
    size_t sa = dtype_size(a->type), sb = dtype_size(b->type);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto* t : order) {
    uint64_t n = t->bytes();
    header[t->name] = {{"dtype", std::string(to_string(t->type))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  output_file out(path);
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const auto* t : order) {
    if (t->data) out.write(t->data, t->bytes());
    else out.produce(t->bytes(), t->fill);
  }
  out.close();
}

}  // namespace troupe
