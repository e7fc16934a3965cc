#include "pipelines/checkpoint/checkpoint_objects.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/pending_uploads.h"

namespace reshard::pipelines_detail {
namespace {

// "data-00003.safetensors": a name only a checkpoint's data file has.
bool is_data_file_name(std::string_view name) {
  constexpr std::string_view kPrefix = "data-", kSuffix = ".safetensors";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

storage::PartLayout plan_parts(const storage::Location& object, const storage::Store& store, uint64_t size,
                               uint64_t part_bytes) {
  try {
    return storage::PartLayout::plan(size, part_bytes, store.part_rules());
  } catch (const Error& e) {
    throw e.with_context(object.str());
  }
}

}  // namespace

bool check_object_destination(const storage::Location& folder, bool replace) {
  const std::shared_ptr<storage::Store> store = storage::open_store(folder);
  if (!folder.key().empty() && store->stat(folder)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: exists and is not a folder (an object has that name)", folder.str()));
  }
  const std::vector<storage::ListEntry> entries = store->list(folder);
  const bool checkpoint = std::any_of(entries.begin(), entries.end(),
                                      [](const auto& entry) { return entry.name == checkpoint::kManifestFileName; });
  if (!checkpoint) {
    // Data files alone are what a save that failed while completing them leaves.
    const bool leftovers =
        std::all_of(entries.begin(), entries.end(), [](const auto& entry) { return is_data_file_name(entry.name); });
    if (leftovers) return false;
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: exists and is not a checkpoint: refusing to replace it", folder.str()));
  }
  if (!replace) throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: a checkpoint is already there", folder.str()));
  return true;
}

DataObject::DataObject(storage::Location object, uint64_t size, uint64_t part_bytes, uint32_t parts_in_flight)
    : object_(std::move(object)), store_(storage::open_store(object_)) {
  const storage::PartLayout layout = plan_parts(object_, *store_, size, part_bytes);
  store_->abort_stale_uploads(object_);
  upload_ = store_->start_upload(object_, layout, storage::IfExists::kReplace);
  pending_ = storage::remember_pending_upload(store_, *upload_);
  try {
    std::vector<uint32_t> every_part(layout.count());
    std::iota(every_part.begin(), every_part.end(), 0u);
    writer_ = std::make_unique<storage::PartWriter>(*upload_, std::move(every_part), std::max<uint32_t>(parts_in_flight, 1));
  } catch (...) {
    upload_->abort();
    storage::forget_pending_upload(pending_);
    throw;
  }
}

DataObject::~DataObject() {
  writer_.reset();
  if (!completed_ && !discarded_) upload_->abort();
  if (pending_ != 0) storage::forget_pending_upload(pending_);
}

void DataObject::append(std::span<const std::byte> bytes) {
  writer_->write_at(position_, bytes);
  position_ += bytes.size();
}

void DataObject::finish() { receipts_ = writer_->finish(); }

void DataObject::complete() {
  upload_->complete(std::move(receipts_));
  completed_ = true;
  storage::forget_pending_upload(pending_);  // nothing left to abort on a stop
  pending_ = 0;
}

void DataObject::discard() noexcept {
  if (discarded_) return;
  discarded_ = true;
  writer_.reset();
  if (!completed_) {
    upload_->abort();
    return;
  }
  try {
    store_->remove(object_);
  } catch (...) {
    // Left behind: without a manifest it is never read, and the next save removes it.
  }
}

void retire_object_manifest(const storage::Location& folder) {
  storage::open_store(folder)->remove(folder.child(checkpoint::kManifestFileName));
}

void write_object_manifest(const storage::Location& folder, std::string_view manifest_bytes,
                           std::span<const checkpoint::DataFile> files) {
  const std::shared_ptr<storage::Store> store = storage::open_store(folder);
  const storage::Location manifest = folder.child(checkpoint::kManifestFileName);
  try {
    store->write_all(manifest, manifest_bytes, storage::IfExists::kReplace);
  } catch (...) {
    try {
      store->remove(manifest);
    } catch (...) {
    }
    throw;
  }
  try {
    for (const storage::ListEntry& entry : store->list(folder)) {
      const bool listed = std::any_of(files.begin(), files.end(), [&](const auto& file) { return file.name == entry.name; });
      if (is_data_file_name(entry.name) && !listed) store->remove(folder.child(entry.name));
    }
  } catch (...) {
  }
}

}  // namespace reshard::pipelines_detail
