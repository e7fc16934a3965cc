#include "storage/s3/s3_head.h"

#include <charconv>

#include <fmt/format.h>

#include "reshard/storage/storage_error.h"

namespace reshard::storage_detail {

std::optional<storage::ObjectInfo> head_object(S3Client& client, const storage::Location& object) {
  const S3Request request{"HEAD", object.bucket(), object.key(), {}, {}, {}, {}, false};
  const HttpResponse response = client.send(request);
  if (response.status == 404) {
    const S3Request bucket{"HEAD", object.bucket(), "", {}, {}, {}, {}, false};
    const HttpResponse answer = client.send(bucket);
    if (answer.status == 404) throw client.error(bucket, answer, "looking for the bucket");
    return std::nullopt;
  }
  if (!response.ok()) throw client.error(request, response, "looking for the object");
  storage::ObjectInfo info;
  const std::string length = response.header("content-length").value_or("");
  const auto [end, error] = std::from_chars(length.data(), length.data() + length.size(), info.size);
  if (error != std::errc() || end != length.data() + length.size()) {
    throw Error(storage::kStoreError,
                fmt::format("{}: the S3 store's answer to HEAD has no Content-Length", object.str()));
  }
  info.version = response.header("etag").value_or("");
  if (const auto version_id = response.header("x-amz-version-id"); version_id && *version_id != "null") {
    info.version += " " + *version_id;
  }
  return info;
}

}  // namespace reshard::storage_detail
