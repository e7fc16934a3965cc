// What killed writers left beside a path that inspect and verify read: local
// staging folders and files of writers that are gone, an object store's
// unfinished uploads under it. Pointed out, never removed: the next write of
// the same destination removes its own.
#pragma once

#include <string>
#include <vector>

#include "reshard/storage/location.h"

namespace reshard::cli {

// The leftovers at `where` (Store::unfinished_uploads), after a "note: "
// line on stderr naming them where there are any. Best effort: a store that
// refuses the listing (no permission to list uploads) gives none.
std::vector<std::string> note_unfinished_uploads(const storage::Location& where);

}  // namespace reshard::cli
