#include "cli/unfinished_uploads.h"

#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/store.h"

namespace reshard::cli {

std::vector<std::string> note_unfinished_uploads(const storage::Location& where) {
  std::vector<std::string> left;
  try {
    left = storage::open_store(where)->unfinished_uploads(where);
  } catch (const Error&) {
    return {};  // only a note: never what makes the command fail
  }
  if (!left.empty()) {
    std::cerr << fmt::format("note: {}: {} unfinished upload{} beside it, left by writers that were killed{}: {}; "
                             "the next write of the same destination removes them\n",
                             where.str(), left.size(), left.size() == 1 ? "" : "s",
                             where.is_local() ? "" : " (or still running: the store cannot tell)",
                             fmt::join(left, ", "));
  }
  return left;
}

}  // namespace reshard::cli
