#include "storage/gcs/gcs_store.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "reshard/storage/storage_error.h"
#include "storage/gcs/gcs_client.h"
#include "storage/gcs/gcs_for_each.h"
#include "storage/gcs/gcs_objects.h"
#include "storage/gcs/gcs_upload.h"
#include "storage/gcs/gcs_upload_names.h"
#include "storage/range_reads.h"

namespace reshard::storage_detail {
namespace {

using storage::Location;

// GCS refuses a Range past the object's end with 416; a shorter object is
// otherwise a short 206.
Error past_the_end(const Location& object, uint64_t offset, size_t size, uint64_t got) {
  return Error(ErrorCode::kIo, fmt::format("{}: the object ends before the range [{}, {}) does (read {} bytes)",
                                           object.str(), offset, offset + size, got));
}

class GcsStore final : public storage::Store {
 public:
  GcsStore(std::shared_ptr<const GcsClient> client, uint32_t concurrency)
      : client_(std::move(client)), concurrency_(concurrency) {}

  std::string_view name() const override { return "gs"; }

  std::optional<storage::ObjectInfo> stat(const Location& object) override {
    check_object(object);
    const std::optional<GcsObject> found = get_object(*client_, object.bucket(), object.key());
    if (!found) {
      // A missing bucket is an error (a misspelt name), not an absent object.
      if (!bucket_exists(*client_, object.bucket())) {
        throw Error(storage::kBucketNotFound,
                    fmt::format("{}: the bucket gs://{} does not exist", object.str(), object.bucket()));
      }
      return std::nullopt;
    }
    return storage::ObjectInfo{found->size, found->generation};
  }

  void read(const Location& object, uint64_t offset, std::span<std::byte> out) override {
    check_object(object);
    if (out.empty()) return;
    const uint64_t last = checked_last(object, offset, out.size());
    HttpRequest request;
    request.url = client_->object_url(object.bucket(), object.key()) + "?alt=media";
    request.headers = {{"Range", fmt::format("bytes={}-{}", offset, last)}};
    request.body_into = out;
    const HttpResponse response = client_->send(request);
    if (response.status == 404) throw missing_object_error(*client_, object.bucket(), object.key());
    if (response.status == 416) throw past_the_end(object, offset, out.size(), 0);
    if (!response.ok()) throw client_->error(response, object.str());
    if (response.bytes_into != out.size()) throw past_the_end(object, offset, out.size(), response.bytes_into);
  }

  void read_ranges(const Location& object, std::span<const storage::RangeRead> ranges) override {
    check_object(object);
    read_ranges_concurrently(ranges, concurrency_,
                             [&](uint64_t offset, std::span<std::byte> out) { read(object, offset, out); });
  }

  std::string read_all(const Location& object, uint64_t limit) override {
    check_object(object);
    // A replaced object: read the new one, a few times at most.
    for (int tries = 0;; ++tries) {
      const std::optional<GcsObject> found = get_object(*client_, object.bucket(), object.key());
      if (!found) throw missing_object_error(*client_, object.bucket(), object.key());
      if (found->size > limit) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: the object has {} bytes, more than the {} expected at most", object.str(),
                                found->size, limit));
      }
      std::string bytes(found->size, '\0');
      if (bytes.empty()) return bytes;
      HttpRequest request;
      request.url = fmt::format("{}?alt=media&generation={}", client_->object_url(object.bucket(), object.key()),
                                uri_encode(found->generation, false));
      request.body_into = std::as_writable_bytes(std::span(bytes));
      const HttpResponse response = client_->send(request);
      if (response.status == 404 && tries < 3) continue;
      if (response.status == 404) throw missing_object_error(*client_, object.bucket(), object.key());
      if (!response.ok()) throw client_->error(response, object.str());
      if (response.bytes_into != bytes.size()) throw past_the_end(object, 0, bytes.size(), response.bytes_into);
      return bytes;
    }
  }

  void write_all(const Location& object, std::string_view bytes, storage::IfExists if_exists) override {
    check_object(object);
    upload_object(*client_, object.bucket(), object.key(), std::as_bytes(std::span(bytes)),
                  if_exists == storage::IfExists::kFail);
  }

  std::vector<storage::ListEntry> list(const Location& prefix) override {
    check_location(prefix);
    const std::string folder = prefix.key().empty() ? std::string() : prefix.key() + "/";
    std::vector<storage::ListEntry> entries;
    for (const GcsObject& object : list_objects(*client_, prefix.bucket(), folder)) {
      std::string name = object.name.substr(folder.size());
      // Folder placeholders ("a/b/", made by consoles) are not objects.
      if (name.empty() || name.back() == '/') continue;
      entries.push_back(storage::ListEntry{std::move(name), object.size});
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return entries;
  }

  void remove(const Location& object) override {
    check_object(object);
    delete_object(*client_, object.bucket(), object.key());
  }

  storage::PartRules part_rules() const override { return gcs_part_rules(); }

  std::unique_ptr<storage::ParallelUpload> start_upload(const Location& object, const storage::PartLayout& layout,
                                                        storage::IfExists if_exists) override {
    check_object(object);
    check_layout(object, layout);
    if (if_exists == storage::IfExists::kFail && get_object(*client_, object.bucket(), object.key())) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", object.str()));
    }
    return std::make_unique<GcsParallelUpload>(client_, object, layout, new_upload_nonce(), if_exists, true);
  }

  std::unique_ptr<storage::ParallelUpload> join_upload(const Location& object, const storage::PartLayout& layout,
                                                       std::string_view handle) override {
    check_object(object);
    check_layout(object, layout);
    auto [nonce, if_exists] = GcsParallelUpload::parse_handle(handle);
    return std::make_unique<GcsParallelUpload>(client_, object, layout, std::move(nonce), if_exists, false);
  }

  size_t abort_stale_uploads(const Location& object) override {
    check_object(object);
    const std::vector<GcsObject> leftovers = list_objects(*client_, object.bucket(), uploads_prefix(object.key()));
    std::set<std::string> uploads;
    std::vector<std::string> names;
    for (const GcsObject& leftover : leftovers) {
      std::string nonce = nonce_of(object.key(), leftover.name);
      if (nonce.empty()) continue;
      uploads.insert(std::move(nonce));
      names.push_back(leftover.name);
    }
    for_each_concurrently(kRequestsAtOnce, names.size(),
                          [&](size_t i) { delete_object(*client_, object.bucket(), names[i]); });
    return uploads.size();
  }

  std::vector<std::string> unfinished_uploads(const Location& where) override {
    check_location(where);
    // The object's own uploads ("KEY.tmp-reshard-NONCE/"), and those of every
    // object under it as a folder: one name per upload.
    std::vector<GcsObject> leftovers = list_objects(*client_, where.bucket(), uploads_prefix(where.key()));
    std::string folder = where.key();
    if (!folder.empty() && !folder.ends_with('/')) folder += '/';
    for (GcsObject& object : list_objects(*client_, where.bucket(), folder)) leftovers.push_back(std::move(object));
    std::set<std::string> uploads;
    for (const GcsObject& leftover : leftovers) {
      const size_t marker = leftover.name.rfind(".tmp-reshard-");
      if (marker == std::string::npos) continue;
      const std::string key = leftover.name.substr(0, marker);
      const std::string nonce = nonce_of(key, leftover.name);
      if (!nonce.empty()) uploads.insert(upload_prefix(key, nonce));
    }
    return {uploads.begin(), uploads.end()};
  }

 private:
  static void check_location(const Location& where) {
    if (where.scheme() != storage::Scheme::kGcs) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is not a gs:// location", where.str()));
    }
  }
  static void check_object(const Location& object) {
    check_location(object);
    if (object.key().empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} is a bucket, not an object (gs://BUCKET/KEY)", object.str()));
    }
  }
  static uint64_t checked_last(const Location& object, uint64_t offset, size_t size) {
    if (offset > UINT64_MAX - size) {
      throw Error(ErrorCode::kOverflow,
                  fmt::format("{}: a read of {} bytes at {} overflows", object.str(), size, offset));
    }
    return offset + size - 1;
  }
  static void check_layout(const Location& object, const storage::PartLayout& layout) {
    const storage::PartRules rules = gcs_part_rules();
    if (layout.count() > rules.max_parts || layout.part_bytes() > rules.max_part_bytes) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} parts of {} bytes is past GCS's limits ({} parts of at most {} bytes)",
                              object.str(), layout.count(), layout.part_bytes(), rules.max_parts,
                              rules.max_part_bytes));
    }
  }

  std::shared_ptr<const GcsClient> client_;
  uint32_t concurrency_;
};

}  // namespace

std::shared_ptr<storage::Store> make_gcs_store(const storage::StoreOptions& options) {
  GcsEndpoint endpoint = resolve_gcs_endpoint(options);
  std::shared_ptr<GcsCredentials> credentials =
      endpoint.emulator ? GcsCredentials::none() : GcsCredentials::from_environment(options.timeout);
  auto client = std::make_shared<const GcsClient>(std::move(endpoint), std::move(credentials), options.timeout);
  return std::make_shared<GcsStore>(std::move(client), options.concurrency);
}

}  // namespace reshard::storage_detail
