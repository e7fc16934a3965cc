// The storage layer's finer error kinds: all ErrorCode::kIo (kAlreadyExists for
// a destination that is there), each with a name of its own so that front ends
// can tell them apart (Python raises a StorageError subclass per name).
#pragma once

#include "reshard/layout/error.h"

namespace reshard::storage {

// No object at the key asked for (a prefix with objects under it included:
// the message says that it is a folder).
inline constexpr ErrorKind kObjectNotFound{ErrorCode::kIo, "object_not_found"};
// The bucket does not exist.
inline constexpr ErrorKind kBucketNotFound{ErrorCode::kIo, "bucket_not_found"};
// The store refused the credentials (HTTP 401/403); the message says where
// they came from, never what they are.
inline constexpr ErrorKind kAccessDenied{ErrorCode::kIo, "access_denied"};
// The endpoint did not answer, or kept failing past the retry budget.
inline constexpr ErrorKind kStoreUnreachable{ErrorCode::kIo, "store_unreachable"};
// Any other refusal of the store: the message has the HTTP status and the
// store's own error code.
inline constexpr ErrorKind kStoreError{ErrorCode::kIo, "store_error"};
// A part size asked for is outside the store's limits: kInvalidArgument under a
// name of its own, so that a front end can name the argument that chose it.
// Not in kAll: it is a bad argument, not a refusal of the store.
inline constexpr ErrorKind kPartSizeOutOfRange{ErrorCode::kInvalidArgument, "part_size_out_of_range"};
// Every kind above but kPartSizeOutOfRange, for front ends that map each name to an error of their own.
inline constexpr ErrorKind kAll[] = {kObjectNotFound, kBucketNotFound, kAccessDenied, kStoreUnreachable, kStoreError};

}  // namespace reshard::storage
