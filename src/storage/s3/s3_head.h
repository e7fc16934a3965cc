// HEAD of an object: what stat, read_all and every IfExists::kFail check ask.
#pragma once

#include <optional>

#include "reshard/storage/location.h"
#include "reshard/storage/store.h"
#include "storage/s3/s3_client.h"

namespace reshard::storage_detail {

// The object's size and version (its ETag), or nullopt when there is none.
// A HEAD answer has no body to tell a missing object from a missing bucket,
// so a 404 asks about the bucket too: Error(kBucketNotFound) when it is gone.
std::optional<storage::ObjectInfo> head_object(S3Client& client, const storage::Location& object);

}  // namespace reshard::storage_detail
