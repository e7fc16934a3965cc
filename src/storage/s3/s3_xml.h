// The S3 protocol's XML: the answers reshard reads (errors, listings,
// multipart uploads) and the one body it sends (CompleteMultipartUpload).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/storage/parallel_upload.h"

namespace reshard::storage_detail {

// <Error><Code>..</Code><Message>..</Message></Error>; nullopt when the body
// is not an S3 error document.
struct S3ErrorBody {
  std::string code;
  std::string message;
};
std::optional<S3ErrorBody> parse_s3_error(std::string_view body);

// InitiateMultipartUploadResult's UploadId (empty when absent).
std::string parse_upload_id(std::string_view body);

// One page of ListObjectsV2. Keys are decoded when the answer says
// EncodingType url.
struct ObjectListPage {
  struct Object {
    std::string key;
    uint64_t size = 0;
  };
  std::vector<Object> objects;
  std::optional<std::string> next_continuation_token;  // set while truncated
};
ObjectListPage parse_list_objects(std::string_view body);

// One page of ListMultipartUploads, asked for without encoding-type=url
// (SeaweedFS answers "EncodingType url" with keys it did not encode), so keys
// are taken as they are.
struct UploadListPage {
  struct Upload {
    std::string key;
    std::string upload_id;
  };
  std::vector<Upload> uploads;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
UploadListPage parse_list_uploads(std::string_view body);

// <CompleteMultipartUpload> listing `receipts` (sorted by index) as parts
// numbered index + 1.
std::string complete_upload_body(const std::vector<storage::PartReceipt>& receipts);

// application/x-www-form-urlencoded decoding ('+' is a space), as S3's
// EncodingType url answers need.
std::string form_decode(std::string_view text);

}  // namespace reshard::storage_detail
