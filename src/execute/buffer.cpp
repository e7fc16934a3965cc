#include "reshard/execute/buffer.h"

#include <new>

#include <sys/mman.h>

namespace reshard {
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

}  // namespace

Buffer Buffer::allocate(size_t size) {
  const std::align_val_t alignment{alignment_for(size)};
  // operator new[] without a new-expression leaves the bytes uninitialised.
  auto* raw = static_cast<std::byte*>(::operator new[](size == 0 ? 1 : size, alignment));
  if (static_cast<size_t>(alignment) == kHugePage) {
    // Advice only: without huge pages the buffer works the same, more slowly.
    (void)madvise(raw, size - size % kHugePage, MADV_HUGEPAGE);
  }
  return Buffer(std::shared_ptr<std::byte[]>(raw, AlignedDelete{alignment}), size);
}

Buffer Buffer::borrow(std::span<const std::byte> bytes) {
  // The aliasing constructor with no owner: a non-owning pointer. The const_cast
  // is safe by the documented contract that nothing writes through a borrow.
  return Buffer(std::shared_ptr<std::byte[]>(std::shared_ptr<std::byte[]>(), const_cast<std::byte*>(bytes.data())),
                bytes.size());
}

}  // namespace reshard
