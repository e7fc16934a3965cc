// The check every store makes before completing a parallel upload.
#pragma once

#include <vector>

#include "reshard/storage/parallel_upload.h"

namespace reshard::storage_detail {

// Sorts `receipts` by part and checks that there is exactly one for each part
// of the upload (Error(kInvalidArgument) naming the destination otherwise).
void check_receipts(const storage::ParallelUpload& upload, std::vector<storage::PartReceipt>& receipts);

}  // namespace reshard::storage_detail
