// A reshard whose messages are strided: rows to columns over four devices a rank, checked byte for byte.
#pragma once

#include <cstdint>

#include "reshard/execute/transport.h"

namespace reshard::testing {

// Collective. Moves a reference [rows, 64 * devices] f32 array split by rows
// to split by columns on reversed devices (runs of 64 floats, 256 bytes, on
// the sending side), and back when `round_trip` (the runs then on the
// receiving side). Records a failure unless every byte arrives and the bytes
// `t` counted as received equal the plans' bytes into this rank.
void check_strided_reshard(Transport& t, int64_t rows, bool round_trip, uint64_t seed);

}  // namespace reshard::testing
