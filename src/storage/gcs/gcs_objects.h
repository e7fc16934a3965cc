// The JSON API's object operations that the store and its parallel uploads
// share: metadata, one-request uploads, deletes, listing and compose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/layout/error.h"
#include "storage/gcs/gcs_client.h"

namespace reshard::storage_detail {

// What reshard reads of an object resource.
struct GcsObject {
  std::string name;
  uint64_t size = 0;
  std::string generation;
  // The custom metadata "reshard-write-id" of a conditional write: how a
  // retried write recognises its own earlier success behind a 412.
  std::string write_id;
};

// The object's metadata, or nullopt on 404 (no object, or no bucket).
std::optional<GcsObject> get_object(const GcsClient& client, std::string_view bucket, std::string_view key);

// Whether the bucket exists (true when the credentials may not ask: only a
// 404 says it does not).
bool bucket_exists(const GcsClient& client, std::string_view bucket);

// The error for an object that is not there: kBucketNotFound when the bucket
// is missing, else kObjectNotFound, saying so when `key` is a folder (objects
// lie under "key/").
Error missing_object_error(const GcsClient& client, std::string_view bucket, std::string_view key);

// Writes `bytes` as the whole object in one request. With `must_not_exist`
// (ifGenerationMatch=0, a multipart upload) an object already there is
// Error(kAlreadyExists); without, a media upload that replaces it.
GcsObject upload_object(const GcsClient& client, std::string_view bucket, std::string_view key,
                        std::span<const std::byte> bytes, bool must_not_exist);

// Deletes the object; false when it was not there.
bool delete_object(const GcsClient& client, std::string_view bucket, std::string_view key);

// Objects whose names start with `prefix`, every page, at most `limit`.
std::vector<GcsObject> list_objects(const GcsClient& client, std::string_view bucket, std::string_view prefix,
                                    size_t limit = SIZE_MAX);

// One source of a compose: a name at a generation.
struct ComposeSource {
  std::string name;
  std::string generation;
};

// At most kMaxComposeSources a request, by GCS's rule.
inline constexpr size_t kMaxComposeSources = 32;

// Composes `sources` (1 to 32, in order) into `key`; `must_not_exist` as for
// upload_object. A missing source is Error(kObjectNotFound) naming `key`.
GcsObject compose_objects(const GcsClient& client, std::string_view bucket, std::span<const ComposeSource> sources,
                          std::string_view key, bool must_not_exist);

// `bytes` random bytes as lower-case hex.
std::string random_hex(size_t bytes);

}  // namespace reshard::storage_detail
