// The rules of the file formats reshard reads, each a distinct, named error:
// a file that breaks one fails with Error(kInvalidFile) of that rule's kind,
// so callers can tell a header too small from a bad offset.
#pragma once

#include <span>

#include "reshard/layout/error.h"

namespace reshard::file_rule {

// safetensors, in the order the reader checks them (as the reference does).
inline constexpr ErrorKind kHeaderTooSmall{ErrorCode::kInvalidFile, "header_too_small"};  // fewer than 8 bytes
inline constexpr ErrorKind kHeaderTooLarge{ErrorCode::kInvalidFile, "header_too_large"};  // N > 100,000,000
inline constexpr ErrorKind kInvalidHeaderLength{ErrorCode::kInvalidFile, "invalid_header_length"};  // 8 + N past the end
inline constexpr ErrorKind kInvalidHeaderUtf8{ErrorCode::kInvalidFile, "invalid_header_utf8"};
inline constexpr ErrorKind kInvalidHeaderJson{ErrorCode::kInvalidFile, "invalid_header_json"};
inline constexpr ErrorKind kInvalidOffset{ErrorCode::kInvalidFile, "invalid_offset"};  // gaps, overlaps, not from 0
inline constexpr ErrorKind kValidationOverflow{ErrorCode::kInvalidFile, "validation_overflow"};
// A sub-byte tensor whose bits do not fill whole bytes (the reference's kind).
inline constexpr ErrorKind kMisalignedSlice{ErrorCode::kInvalidFile, "misaligned_slice"};
inline constexpr ErrorKind kInvalidTensorInfo{ErrorCode::kInvalidFile, "invalid_tensor_info"};  // size != dtype x shape
inline constexpr ErrorKind kIncompleteBuffer{ErrorCode::kInvalidFile, "incomplete_buffer"};  // truncated or trailing bytes
// model.safetensors.index.json that is malformed or disagrees with the files.
inline constexpr ErrorKind kInvalidIndex{ErrorCode::kInvalidFile, "invalid_index"};
// A checkpoint manifest that is malformed, inconsistent or of an unknown version.
inline constexpr ErrorKind kInvalidManifest{ErrorCode::kInvalidFile, "invalid_manifest"};

// Every rule above: what a front end maps to its own errors.
inline constexpr ErrorKind kAll[] = {kHeaderTooSmall,    kHeaderTooLarge,     kInvalidHeaderLength, kInvalidHeaderUtf8,
                                     kInvalidHeaderJson, kInvalidOffset,      kValidationOverflow,  kMisalignedSlice,
                                     kInvalidTensorInfo, kIncompleteBuffer,   kInvalidIndex,        kInvalidManifest};

}  // namespace reshard::file_rule
