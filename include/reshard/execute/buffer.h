// Buffer: a block of bytes with shared ownership, allocated without zero-filling.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace reshard {

// Copies of a Buffer share its bytes (as arrays in JAX share device buffers):
// an array that a no-op reshard returns holds the very same memory.
class Buffer {
 public:
  Buffer() = default;

  // `size` bytes, 64-byte aligned and uninitialised: every byte of a
  // destination is written exactly once, so zero-filling would only cost time.
  static Buffer allocate(size_t size);

  // A read-only view of memory the caller owns and keeps alive for as long as
  // any copy of the result; nothing may write through it.
  static Buffer borrow(std::span<const std::byte> bytes);

  size_t size() const { return size_; }
  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  std::span<std::byte> bytes() { return {data_.get(), size_}; }
  std::span<const std::byte> bytes() const { return {data_.get(), size_}; }

  // Whether both share the same memory.
  bool shares_memory_with(const Buffer& other) const { return data_ == other.data_; }

 private:
  Buffer(std::shared_ptr<std::byte[]> data, size_t size) : data_(std::move(data)), size_(size) {}
  std::shared_ptr<std::byte[]> data_;
  size_t size_ = 0;
};

}  // namespace reshard
