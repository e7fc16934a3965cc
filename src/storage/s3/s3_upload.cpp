#include "storage/s3/s3_upload.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/s3/s3_head.h"
#include "storage/s3/s3_xml.h"

namespace reshard::storage_detail {
namespace {

// Aborting is best effort (a destructor may do it after the store failed):
// it gives up sooner than other requests.
constexpr std::chrono::milliseconds kAbortTimeout{std::chrono::seconds(15)};

}  // namespace

S3Upload::S3Upload(std::shared_ptr<S3Client> client, storage::Location destination, storage::PartLayout layout,
                   std::string upload_id, storage::IfExists if_exists, bool starter)
    : client_(std::move(client)),
      destination_(std::move(destination)),
      layout_(layout),
      upload_id_(std::move(upload_id)),
      if_exists_(if_exists),
      starter_(starter) {}

S3Upload::~S3Upload() {
  if (starter_ && !completed_) abort();
}

S3Request S3Upload::request(std::string method) const {
  S3Request request;
  request.method = std::move(method);
  request.bucket = destination_.bucket();
  request.key = destination_.key();
  request.query = {{"uploadId", upload_id_}};
  return request;
}

storage::PartReceipt S3Upload::write_part(uint32_t index, std::span<const std::byte> bytes) {
  const uint64_t expected = layout_.size(index);  // Error(kInvalidArgument) past the last part
  if (bytes.size() != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: part {} of the upload is {} bytes, not {}", destination_.str(), index, expected,
                            bytes.size()));
  }
  S3Request put = request("PUT");
  put.query.emplace_back("partNumber", std::to_string(uint64_t{index} + 1));
  put.body = bytes;
  const HttpResponse response = client_->send(put);
  if (!response.ok()) throw client_->error(put, response, fmt::format("uploading part {}", index));
  const std::optional<std::string> etag = response.header("etag");
  if (!etag || etag->empty()) {
    throw Error(storage::kStoreError,
                fmt::format("{}: the S3 store gave no ETag for part {} of the upload", destination_.str(), index));
  }
  return storage::PartReceipt{index, *etag};
}

void S3Upload::check_receipts(std::vector<storage::PartReceipt>& receipts) const {
  std::sort(receipts.begin(), receipts.end(),
            [](const storage::PartReceipt& a, const storage::PartReceipt& b) { return a.index < b.index; });
  const uint32_t count = layout_.count();
  for (size_t i = 0; i < receipts.size(); ++i) {
    const uint32_t index = receipts[i].index;
    std::string why;
    if (index >= count) {
      why = fmt::format("a receipt for part {}, past the last of {} parts", index, count);
    } else if (i > 0 && receipts[i - 1].index == index) {
      why = fmt::format("two receipts for part {}", index);
    } else if (index != i) {
      why = fmt::format("no receipt for part {}", i);
    } else if (receipts[i].tag.empty()) {
      why = fmt::format("the receipt for part {} has no tag", index);
    }
    if (!why.empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: completing the upload: {}", destination_.str(), why));
    }
  }
  if (receipts.size() != count) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: completing the upload: no receipt for part {}",
                                                         destination_.str(), receipts.size()));
  }
}

bool S3Upload::completed_by_earlier_attempt() {
  const std::optional<storage::ObjectInfo> info = head_object(*client_, destination_);
  // A multipart object's ETag is "<md5 of the parts' md5s>-<number of parts>".
  return info && info->size == layout_.object_bytes() &&
         info->version.find(fmt::format("-{}\"", layout_.count())) != std::string::npos;
}

void S3Upload::send_complete(const std::vector<storage::PartReceipt>& receipts) {
  if (if_exists_ == storage::IfExists::kFail && head_object(*client_, destination_)) {
    throw Error(ErrorCode::kAlreadyExists, fmt::format("{} already exists", destination_.str()));
  }
  const std::string body = complete_upload_body(receipts);
  S3Request post = request("POST");
  post.body = std::as_bytes(std::span(body));
  post.error_in_ok_body = true;
  // Where the store honours it, the check above cannot race another writer.
  if (if_exists_ == storage::IfExists::kFail) post.headers.emplace_back("if-none-match", "*");
  int attempts = 0;
  const HttpResponse response = client_->send(post, &attempts);
  if (response.ok()) return;
  // A retry after a Complete whose answer was lost finds the upload gone
  // (NoSuchUpload) or, with If-None-Match, its own object there (412).
  const std::optional<S3ErrorBody> error = parse_s3_error(response.body);
  const bool maybe_done = response.status == 412 || (error && error->code == "NoSuchUpload");
  if (attempts > 1 && maybe_done && completed_by_earlier_attempt()) return;
  if (response.status == 412) {
    throw Error(ErrorCode::kAlreadyExists, fmt::format("{} already exists", destination_.str()));
  }
  throw client_->error(post, response, "completing the upload");
}

void S3Upload::complete(std::vector<storage::PartReceipt> receipts) {
  if (!starter_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: only the process that started an upload completes it", destination_.str()));
  }
  if (completed_ || aborted_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the upload was already {}", destination_.str(), completed_ ? "completed" : "aborted"));
  }
  try {
    check_receipts(receipts);
    send_complete(receipts);
  } catch (...) {
    abort();
    throw;
  }
  completed_ = true;
}

void S3Upload::abort() noexcept {
  if (completed_ || aborted_.exchange(true)) return;
  try {
    const S3Request del = request("DELETE");
    // NoSuchUpload (404) is an upload already gone; any other failure leaves
    // parts for abort_stale_uploads or the bucket's lifecycle rules.
    client_->send(del, nullptr, std::min(client_->options().timeout, kAbortTimeout));
  } catch (...) {
  }
}

}  // namespace reshard::storage_detail
