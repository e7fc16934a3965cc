#include "storage/memory/memory_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/receipts.h"

namespace reshard::storage_detail {
namespace {

using storage::Location;

// Objects by "bucket/key"; uploads in progress by their handle.
struct Contents {
  struct Upload {
    std::string object;  // "bucket/key"
    std::map<uint32_t, std::string> parts;
  };
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const std::string>> objects;
  std::map<std::string, Upload> uploads;
  std::atomic<uint64_t> next_handle{1};
};

std::string full_key(const Location& where) { return fmt::format("{}/{}", where.bucket(), where.key()); }

class MemoryUpload final : public storage::ParallelUpload {
 public:
  MemoryUpload(std::shared_ptr<Contents> contents, Location destination, storage::PartLayout layout,
               std::string handle, bool starter, storage::IfExists if_exists)
      : contents_(std::move(contents)),
        destination_(std::move(destination)),
        layout_(layout),
        handle_(std::move(handle)),
        starter_(starter),
        if_exists_(if_exists) {}
  ~MemoryUpload() override {
    if (starter_ && !done_) abort();
  }

  const Location& destination() const override { return destination_; }
  const storage::PartLayout& parts() const override { return layout_; }
  std::string handle() const override { return handle_; }

  storage::PartReceipt write_part(uint32_t index, std::span<const std::byte> bytes) override {
    if (bytes.size() != layout_.size(index)) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: part {} is {} bytes, not {}", destination_.str(),
                                                           index, layout_.size(index), bytes.size()));
    }
    const std::lock_guard lock(contents_->mutex);
    const auto upload = contents_->uploads.find(handle_);
    if (upload == contents_->uploads.end()) {
      throw Error(storage::kStoreError, fmt::format("{}: no upload {} (aborted?)", destination_.str(), handle_));
    }
    upload->second.parts[index].assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return storage::PartReceipt{index, fmt::format("{}-{}", handle_, index)};
  }

  void complete(std::vector<storage::PartReceipt> receipts) override {
    try {
      check_receipts(*this, receipts);
      const std::lock_guard lock(contents_->mutex);
      const auto upload = contents_->uploads.find(handle_);
      if (upload == contents_->uploads.end() || upload->second.parts.size() != layout_.count()) {
        throw Error(storage::kStoreError, fmt::format("{}: parts of upload {} are missing", destination_.str(), handle_));
      }
      const std::string key = full_key(destination_);
      if (if_exists_ == storage::IfExists::kFail && contents_->objects.contains(key)) {
        throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", destination_.str()));
      }
      auto object = std::make_shared<std::string>();
      for (auto& [index, bytes] : upload->second.parts) *object += bytes;
      contents_->objects[key] = std::move(object);
      contents_->uploads.erase(upload);
      done_ = true;
    } catch (...) {
      abort();
      throw;
    }
  }

  void abort() noexcept override {
    done_ = true;
    const std::lock_guard lock(contents_->mutex);
    contents_->uploads.erase(handle_);
  }

 private:
  std::shared_ptr<Contents> contents_;
  Location destination_;
  storage::PartLayout layout_;
  std::string handle_;
  bool starter_ = false;
  bool done_ = false;
  storage::IfExists if_exists_;
};

class MemoryStore final : public storage::Store {
 public:
  std::string_view name() const override { return "memory"; }

  std::optional<storage::ObjectInfo> stat(const Location& object) override {
    const auto bytes = find(object);
    if (!bytes) return std::nullopt;
    return storage::ObjectInfo{bytes->size(), fmt::format("{}", reinterpret_cast<uintptr_t>(bytes.get()))};
  }

  void read(const Location& object, uint64_t offset, std::span<std::byte> out) override {
    const auto bytes = existing(object);
    if (offset > bytes->size() || out.size() > bytes->size() - offset) {
      throw Error(ErrorCode::kIo, fmt::format("reading {}: the object is {} bytes, the read wants {} at {}",
                                              object.str(), bytes->size(), out.size(), offset));
    }
    if (!out.empty()) std::memcpy(out.data(), bytes->data() + offset, out.size());
  }

  std::string read_all(const Location& object, uint64_t limit) override {
    const auto bytes = existing(object);
    if (bytes->size() > limit) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: is {} bytes, more than the {} a file of this kind may have", object.str(),
                              bytes->size(), limit));
    }
    return *bytes;
  }

  void write_all(const Location& object, std::string_view bytes, storage::IfExists if_exists) override {
    const std::lock_guard lock(contents_->mutex);
    const std::string key = full_key(object);
    if (if_exists == storage::IfExists::kFail && contents_->objects.contains(key)) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", object.str()));
    }
    contents_->objects[key] = std::make_shared<const std::string>(bytes);
  }

  std::vector<storage::ListEntry> list(const Location& prefix) override {
    const std::string start = prefix.key().empty() ? prefix.bucket() + "/" : full_key(prefix) + "/";
    std::vector<storage::ListEntry> entries;
    const std::lock_guard lock(contents_->mutex);
    for (auto it = contents_->objects.lower_bound(start); it != contents_->objects.end(); ++it) {
      if (!it->first.starts_with(start)) break;
      entries.push_back({it->first.substr(start.size()), it->second->size()});
    }
    return entries;
  }

  void remove(const Location& object) override {
    const std::lock_guard lock(contents_->mutex);
    contents_->objects.erase(full_key(object));
  }

  // As an object store's, with parts small enough for tests to cut files into many.
  storage::PartRules part_rules() const override {
    storage::PartRules rules;
    rules.min_part_bytes = 1024;
    rules.max_parts = 10000;
    rules.default_part_bytes = 1 << 20;
    return rules;
  }

  std::unique_ptr<storage::ParallelUpload> start_upload(const Location& object, const storage::PartLayout& layout,
                                                        storage::IfExists if_exists) override {
    std::string handle = fmt::format("upload-{}", contents_->next_handle++);
    {
      const std::lock_guard lock(contents_->mutex);
      if (if_exists == storage::IfExists::kFail && contents_->objects.contains(full_key(object))) {
        throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", object.str()));
      }
      contents_->uploads[handle] = Contents::Upload{full_key(object), {}};
    }
    return std::make_unique<MemoryUpload>(contents_, object, layout, std::move(handle), true, if_exists);
  }

  std::unique_ptr<storage::ParallelUpload> join_upload(const Location& object, const storage::PartLayout& layout,
                                                       std::string_view handle) override {
    const std::lock_guard lock(contents_->mutex);
    const auto upload = contents_->uploads.find(std::string(handle));
    if (upload == contents_->uploads.end() || upload->second.object != full_key(object)) {
      throw Error(storage::kStoreError,
                  fmt::format("{}: no upload {} in progress", object.str(), std::string(handle)));
    }
    return std::make_unique<MemoryUpload>(contents_, object, layout, std::string(handle), false,
                                          storage::IfExists::kReplace);
  }

  size_t abort_stale_uploads(const Location& object) override {
    const std::lock_guard lock(contents_->mutex);
    return std::erase_if(contents_->uploads, [&](const auto& item) { return item.second.object == full_key(object); });
  }

 private:
  std::shared_ptr<const std::string> find(const Location& object) {
    const std::lock_guard lock(contents_->mutex);
    const auto it = contents_->objects.find(full_key(object));
    return it == contents_->objects.end() ? nullptr : it->second;
  }

  std::shared_ptr<const std::string> existing(const Location& object) {
    auto bytes = find(object);
    if (!bytes) throw Error(storage::kObjectNotFound, fmt::format("{}: no such object", object.str()));
    return bytes;
  }

  std::shared_ptr<Contents> contents_ = std::make_shared<Contents>();
};

}  // namespace

std::shared_ptr<storage::Store> memory_store() {
  static const std::shared_ptr<storage::Store> store = std::make_shared<MemoryStore>();
  return store;
}

}  // namespace reshard::storage_detail
