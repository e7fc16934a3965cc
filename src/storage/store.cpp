#include "reshard/storage/store.h"

namespace reshard::storage {

void Store::read_ranges(const Location& object, std::span<const RangeRead> ranges) {
  for (const RangeRead& range : ranges) read(object, range.offset, range.out);
}

}  // namespace reshard::storage
