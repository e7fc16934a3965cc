#include "reshard/execute/buffer.h"

#include <new>

namespace reshard {
namespace {

constexpr std::align_val_t kAlignment{64};

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, kAlignment); }
};

}  // namespace

Buffer Buffer::allocate(size_t size) {
  // operator new[] without a new-expression leaves the bytes uninitialised.
  auto* raw = static_cast<std::byte*>(::operator new[](size == 0 ? 1 : size, kAlignment));
  return Buffer(std::shared_ptr<std::byte[]>(raw, AlignedDelete{}), size);
}

Buffer Buffer::borrow(std::span<const std::byte> bytes) {
  // The aliasing constructor with no owner: a non-owning pointer. The const_cast
  // is safe by the documented contract that nothing writes through a borrow.
  return Buffer(std::shared_ptr<std::byte[]>(std::shared_ptr<std::byte[]>(), const_cast<std::byte*>(bytes.data())),
                bytes.size());
}

}  // namespace reshard
