// A read-only memory mapping of a whole file: checkpoints are used in place, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe {

class mapped_file {
 public:
  mapped_file() = default;
  // Throws troupe::error(io_error) naming the path when the file cannot be opened or mapped.
  explicit mapped_file(const std::string& path);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

 private:
  void reset() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace troupe
