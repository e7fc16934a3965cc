// A parallel upload to GCS: each part is a temporary component object; the
// starter composes them (32 at a time, in a tree) into the destination and
// deletes them. GCS composes at most 1024 components into one object, so an
// upload has at most that many parts.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "reshard/storage/parallel_upload.h"
#include "storage/gcs/gcs_client.h"
#include "storage/gcs/gcs_objects.h"

namespace reshard::storage_detail {

// GCS's parts: any size up to 5 GiB, at most 1024 (a composite's component limit).
storage::PartRules gcs_part_rules();

class GcsParallelUpload final : public storage::ParallelUpload {
 public:
  // `starter`: this process started the upload and aborts it on destruction
  // unless it completed.
  GcsParallelUpload(std::shared_ptr<const GcsClient> client, storage::Location destination,
                    storage::PartLayout layout, std::string nonce, storage::IfExists if_exists, bool starter);
  ~GcsParallelUpload() override;

  // "NONCE:replace" or "NONCE:fail".
  static std::string make_handle(std::string_view nonce, storage::IfExists if_exists);
  // The nonce and mode of a handle; Error(kInvalidArgument) for other text.
  static std::pair<std::string, storage::IfExists> parse_handle(std::string_view handle);

  const storage::Location& destination() const override { return destination_; }
  const storage::PartLayout& parts() const override { return layout_; }
  std::string handle() const override { return make_handle(nonce_, if_exists_); }

  storage::PartReceipt write_part(uint32_t index, std::span<const std::byte> bytes) override;
  void complete(std::vector<storage::PartReceipt> receipts) override;
  void abort() noexcept override;

 private:
  std::vector<ComposeSource> checked_components(const std::vector<storage::PartReceipt>& receipts) const;
  void compose_all(std::vector<ComposeSource> sources) const;
  // Deletes every object under the upload's prefix, as far as the store lets it.
  void delete_all() const noexcept;

  std::shared_ptr<const GcsClient> client_;
  storage::Location destination_;
  storage::PartLayout layout_;
  std::string nonce_;
  storage::IfExists if_exists_;
  bool starter_;
  std::atomic<bool> finished_{false};
};

}  // namespace reshard::storage_detail
