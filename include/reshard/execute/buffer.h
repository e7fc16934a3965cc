// Buffer: a block of bytes with shared ownership: allocated here, or adopted from the caller.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace reshard {

// Copies of a Buffer share its bytes (as arrays in JAX share device buffers):
// an array that a no-op reshard returns holds the very same memory. A buffer
// is writable or read-only, and so are all its copies: a read-only buffer
// never hands out a writable pointer (asking is Error(kInvalidArgument)).
class Buffer {
 public:
  Buffer() = default;

  // `size` bytes, 64-byte aligned and uninitialised: every byte of a
  // destination is written exactly once, so zero-filling would only cost time.
  static Buffer allocate(size_t size);

  // Writable memory the caller owns (a numpy array, a DLPack tensor, a
  // framework's host buffer). `owner` is kept alive for as long as any copy
  // of the result, or any transfer still using it; null means the caller
  // promises to keep `bytes` alive that long itself.
  static Buffer adopt(std::span<std::byte> bytes, std::shared_ptr<const void> owner);

  // The same for memory nothing may write (a read-only memory map, a
  // non-writable numpy array): the result and its copies are read-only.
  static Buffer adopt_read_only(std::span<const std::byte> bytes, std::shared_ptr<const void> owner);

  // A read-only view of memory the caller keeps alive for as long as any copy
  // of the result (adopt_read_only without an owner).
  static Buffer borrow(std::span<const std::byte> bytes);

  size_t size() const { return size_; }
  // Whether writing through this buffer is allowed.
  bool writable() const { return writable_; }

  // Writable access: throws Error(kInvalidArgument) if the buffer is read-only.
  std::byte* data();
  std::span<std::byte> bytes() { return {data(), size_}; }
  // Read access, allowed on every buffer.
  const std::byte* data() const { return data_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

  // What keeps the bytes alive (null for a borrow): a transfer that may
  // outlive its caller's copy of the buffer holds this.
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Whether both share the same memory.
  bool shares_memory_with(const Buffer& other) const { return data_ == other.data_; }

 private:
  Buffer(std::shared_ptr<const void> owner, std::byte* data, size_t size, bool writable)
      : owner_(std::move(owner)), data_(data), size_(size), writable_(writable) {}
  std::shared_ptr<const void> owner_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool writable_ = true;
};

}  // namespace reshard
