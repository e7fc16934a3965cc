// A parallel upload as an S3 multipart upload: the handle is the UploadId,
// part `index` is part number index + 1, a receipt's tag is the part's ETag.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "reshard/storage/parallel_upload.h"
#include "storage/s3/s3_client.h"

namespace reshard::storage_detail {

class S3Upload final : public storage::ParallelUpload {
 public:
  // `starter`: this process started it, completes it, and aborts it when
  // destroyed before completing.
  S3Upload(std::shared_ptr<S3Client> client, storage::Location destination, storage::PartLayout layout,
           std::string upload_id, storage::IfExists if_exists, bool starter);
  ~S3Upload() override;
  S3Upload(const S3Upload&) = delete;
  S3Upload& operator=(const S3Upload&) = delete;

  const storage::Location& destination() const override { return destination_; }
  const storage::PartLayout& parts() const override { return layout_; }
  std::string handle() const override { return upload_id_; }

  storage::PartReceipt write_part(uint32_t index, std::span<const std::byte> bytes) override;
  void complete(std::vector<storage::PartReceipt> receipts) override;
  void abort() noexcept override;

 private:
  S3Request request(std::string method) const;
  void check_receipts(std::vector<storage::PartReceipt>& receipts) const;
  void send_complete(const std::vector<storage::PartReceipt>& receipts);
  // Whether the object is there as this upload's result (a Complete whose
  // answer was lost, retried into NoSuchUpload).
  bool completed_by_earlier_attempt();

  std::shared_ptr<S3Client> client_;
  storage::Location destination_;
  storage::PartLayout layout_;
  std::string upload_id_;
  storage::IfExists if_exists_;
  bool starter_;
  std::atomic<bool> completed_{false};
  std::atomic<bool> aborted_{false};
};

}  // namespace reshard::storage_detail
