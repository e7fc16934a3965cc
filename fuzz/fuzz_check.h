// Invariant checks for fuzz targets: a broken invariant is a crash libFuzzer reports.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace reshard::fuzz {

// Aborts with `what` when `ok` is false.
inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace reshard::fuzz
