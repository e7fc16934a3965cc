#include "pipelines/support/sub_box.h"

namespace reshard::testing {

std::vector<std::byte> sub_box(const std::vector<std::byte>& whole, const Shape& shape, const Box& box, size_t element) {
  std::vector<std::byte> out;
  for (int64_t i = 0; i < box.volume(); ++i) {
    int64_t rest = i, offset = 0, stride = 1;
    std::vector<int64_t> index(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      index[d] = box.origin()[d] + rest % box.shape()[d];
      rest /= box.shape()[d];
    }
    for (size_t d = shape.size(); d-- > 0;) {
      offset += index[d] * stride;
      stride *= shape[d];
    }
    const auto at = whole.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(offset) * element);
    out.insert(out.end(), at, at + static_cast<std::ptrdiff_t>(element));
  }
  return out;
}

}  // namespace reshard::testing
