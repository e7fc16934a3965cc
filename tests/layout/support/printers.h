// How GoogleTest prints layout values in failure messages ("[0:2, 4:8]"
// rather than bytes). Include it in every test that compares these values.
#pragma once

#include <ostream>

#include "reshard/layout/box.h"

namespace reshard {

inline void PrintTo(const Box& box, std::ostream* out) { *out << box.to_string(); }
inline void PrintTo(const Interval& i, std::ostream* out) { *out << "[" << i.begin << ":" << i.end << ")"; }
inline void PrintTo(const Run& run, std::ostream* out) { *out << "{offset " << run.offset << ", length " << run.length << "}"; }

}  // namespace reshard
