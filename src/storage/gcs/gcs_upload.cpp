#include "storage/gcs/gcs_upload.h"

#include <map>

#include <fmt/format.h>

#include "reshard/storage/storage_error.h"
#include "storage/gcs/gcs_for_each.h"
#include "storage/gcs/gcs_upload_names.h"

namespace reshard::storage_detail {

storage::PartRules gcs_part_rules() {
  storage::PartRules rules;
  rules.min_part_bytes = 1;
  rules.max_part_bytes = uint64_t{5} << 30;
  rules.max_parts = 1024;
  rules.default_part_bytes = uint64_t{64} << 20;
  return rules;
}

GcsParallelUpload::GcsParallelUpload(std::shared_ptr<const GcsClient> client, storage::Location destination,
                                     storage::PartLayout layout, std::string nonce, storage::IfExists if_exists,
                                     bool starter)
    : client_(std::move(client)),
      destination_(std::move(destination)),
      layout_(layout),
      nonce_(std::move(nonce)),
      if_exists_(if_exists),
      starter_(starter) {}

GcsParallelUpload::~GcsParallelUpload() {
  if (starter_ && !finished_.load()) abort();
}

std::string GcsParallelUpload::make_handle(std::string_view nonce, storage::IfExists if_exists) {
  return fmt::format("{}:{}", nonce, if_exists == storage::IfExists::kFail ? "fail" : "replace");
}

std::pair<std::string, storage::IfExists> GcsParallelUpload::parse_handle(std::string_view handle) {
  const size_t colon = handle.find(':');
  const std::string_view nonce = handle.substr(0, colon);
  const std::string_view mode = colon == std::string_view::npos ? std::string_view() : handle.substr(colon + 1);
  if (!is_upload_nonce(nonce) || (mode != "fail" && mode != "replace")) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("{:?} is not the handle of a GCS upload (NONCE:replace or NONCE:fail)", std::string(handle)));
  }
  return {std::string(nonce), mode == "fail" ? storage::IfExists::kFail : storage::IfExists::kReplace};
}

storage::PartReceipt GcsParallelUpload::write_part(uint32_t index, std::span<const std::byte> bytes) {
  const uint64_t expected = layout_.size(index);  // Error(kInvalidArgument) past the last part
  if (bytes.size() != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: part {} is {} bytes, not {}", destination_.str(), index, expected, bytes.size()));
  }
  const GcsObject component =
      upload_object(*client_, destination_.bucket(), component_name(destination_.key(), nonce_, index), bytes, false);
  return storage::PartReceipt{index, component.generation};
}

std::vector<ComposeSource> GcsParallelUpload::checked_components(
    const std::vector<storage::PartReceipt>& receipts) const {
  const uint32_t count = layout_.count();
  std::vector<const storage::PartReceipt*> by_index(count, nullptr);
  for (const storage::PartReceipt& receipt : receipts) {
    if (receipt.index >= count) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: a receipt for part {} of an upload of {} parts",
                                                           destination_.str(), receipt.index, count));
    }
    if (by_index[receipt.index] != nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: two receipts for part {}", destination_.str(), receipt.index));
    }
    by_index[receipt.index] = &receipt;
  }
  // What the store holds: a part written again since its receipt, or never
  // written, must not slip into the object.
  std::map<std::string, std::string> generations;
  for (GcsObject& object : list_objects(*client_, destination_.bucket(), upload_prefix(destination_.key(), nonce_))) {
    generations.emplace(std::move(object.name), std::move(object.generation));
  }
  std::vector<ComposeSource> sources;
  sources.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (by_index[i] == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: no receipt for part {}", destination_.str(), i));
    }
    std::string name = component_name(destination_.key(), nonce_, i);
    const auto found = generations.find(name);
    if (found == generations.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: part {} has a receipt but the store holds no such part", destination_.str(), i));
    }
    if (found->second != by_index[i]->tag) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: part {} was written again after its receipt {}", destination_.str(), i,
                              by_index[i]->serialize()));
    }
    sources.push_back(ComposeSource{std::move(name), found->second});
  }
  return sources;
}

void GcsParallelUpload::compose_all(std::vector<ComposeSource> sources) const {
  const std::string& bucket = destination_.bucket();
  // Compose takes 32 sources: group them into intermediate composites, level
  // by level, until one compose makes the object (1024 parts: two levels).
  for (uint32_t level = 1; sources.size() > kMaxComposeSources; ++level) {
    std::vector<ComposeSource> next((sources.size() + kMaxComposeSources - 1) / kMaxComposeSources);
    for_each_concurrently(kRequestsAtOnce, next.size(), [&](size_t i) {
      const size_t first = i * kMaxComposeSources;
      const size_t n = std::min(kMaxComposeSources, sources.size() - first);
      std::string name = composite_name(destination_.key(), nonce_, level, static_cast<uint32_t>(i));
      const GcsObject composite =
          compose_objects(*client_, bucket, std::span(sources).subspan(first, n), name, false);
      next[i] = ComposeSource{std::move(name), composite.generation};
    });
    sources = std::move(next);
  }
  const GcsObject object =
      compose_objects(*client_, bucket, sources, destination_.key(), if_exists_ == storage::IfExists::kFail);
  if (object.size != layout_.object_bytes()) {
    throw Error(storage::kStoreError, fmt::format("{}: the composed object has {} bytes, not {}", destination_.str(),
                                                  object.size, layout_.object_bytes()));
  }
}

void GcsParallelUpload::complete(std::vector<storage::PartReceipt> receipts) {
  try {
    std::vector<ComposeSource> sources = checked_components(receipts);
    // fake-gcs-server ignores a compose's ifGenerationMatch: ask first, and let GCS check again.
    if (if_exists_ == storage::IfExists::kFail &&
        get_object(*client_, destination_.bucket(), destination_.key()).has_value()) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", destination_.str()));
    }
    compose_all(std::move(sources));
  } catch (...) {
    abort();
    throw;
  }
  finished_.store(true);
  // The object is whole; a component left behind (a failed delete) is what
  // abort_stale_uploads finds later.
  delete_all();
}

void GcsParallelUpload::abort() noexcept {
  finished_.store(true);
  delete_all();
}

void GcsParallelUpload::delete_all() const noexcept {
  try {
    const std::vector<GcsObject> objects =
        list_objects(*client_, destination_.bucket(), upload_prefix(destination_.key(), nonce_));
    for_each_concurrently(kRequestsAtOnce, objects.size(),
                          [&](size_t i) { delete_object(*client_, destination_.bucket(), objects[i].name); });
  } catch (const std::exception&) {
    // Whatever is left, abort_stale_uploads finds.
  }
}

}  // namespace reshard::storage_detail
