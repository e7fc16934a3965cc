#include "reshard/execute/buffer.h"

#include <new>
#include <optional>

#include <fmt/format.h>

#include <sys/mman.h>

#include "reshard/layout/error.h"
#include "shared_arena.h"

namespace reshard {

using execute_detail::SharedArena;

namespace {

constexpr size_t kSmallAlignment = 64;
// Large buffers start on a 2 MiB boundary and ask for transparent huge pages:
// copies that stride through them then miss the TLB once per 2 MiB, not per 4 KiB.
constexpr size_t kHugePage = size_t{2} << 20;

size_t alignment_for(size_t size) { return size >= 2 * kHugePage ? kHugePage : kSmallAlignment; }

struct AlignedDelete {
  std::align_val_t alignment;
  void operator()(std::byte* p) const { ::operator delete[](p, alignment); }
};

// A large buffer in the process's shared arena, where same-host peers read
// it in place; empty when the arena is off or full.
std::optional<Buffer> allocate_shared(size_t size) {
  if (size < SharedArena::kMinBytes || !SharedArena::serving_allocations()) return std::nullopt;
  SharedArena* arena = SharedArena::for_process();
  std::byte* data = arena != nullptr ? arena->allocate(size) : nullptr;
  if (data == nullptr) return std::nullopt;
  std::shared_ptr<std::byte> owner(data, [arena, size](std::byte* p) { arena->release(p, size); });
  return Buffer::adopt(std::span(data, size), std::move(owner));
}

}  // namespace

Buffer Buffer::allocate(size_t size) {
  if (std::optional<Buffer> shared = allocate_shared(size)) return std::move(*shared);
  const std::align_val_t alignment{alignment_for(size)};
  // operator new[] without a new-expression leaves the bytes uninitialised.
  auto* raw = static_cast<std::byte*>(::operator new[](size == 0 ? 1 : size, alignment));
  if (static_cast<size_t>(alignment) == kHugePage) {
    // Advice only: without huge pages the buffer works the same, more slowly.
    (void)madvise(raw, size - size % kHugePage, MADV_HUGEPAGE);
  }
  std::shared_ptr<std::byte[]> owner(raw, AlignedDelete{alignment});
  return Buffer(std::move(owner), raw, size, true);
}

Buffer Buffer::adopt(std::span<std::byte> bytes, std::shared_ptr<const void> owner) {
  return Buffer(std::move(owner), bytes.data(), bytes.size(), true);
}

Buffer Buffer::adopt_read_only(std::span<const std::byte> bytes, std::shared_ptr<const void> owner) {
  // Stored without const so that one pointer serves both kinds; data() hands
  // it out writable only when `writable_` says so.
  return Buffer(std::move(owner), const_cast<std::byte*>(bytes.data()), bytes.size(), false);
}

Buffer Buffer::borrow(std::span<const std::byte> bytes) { return adopt_read_only(bytes, nullptr); }

std::byte* Buffer::data() {
  if (!writable_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("a read-only buffer of {} bytes cannot be written (it was adopted or borrowed "
                            "read-only; copy it into Buffer::allocate to change it)",
                            size_));
  }
  return data_;
}

}  // namespace reshard
