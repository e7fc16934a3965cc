#include "storage/s3/s3_store.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/range_reads.h"
#include "storage/s3/digests.h"
#include "storage/s3/s3_client.h"
#include "storage/s3/s3_head.h"
#include "storage/s3/s3_upload.h"
#include "storage/s3/s3_xml.h"

namespace reshard::storage_detail {

using layout_detail::checked_add;

namespace {

using storage::IfExists;
using storage::Location;

// read_all retries when the object is replaced between its HEAD and its GET.
constexpr int kReadAllAttempts = 3;

[[noreturn]] void already_exists(const Location& object) {
  throw Error(ErrorCode::kAlreadyExists, fmt::format("{} already exists", object.str()));
}

class S3Store final : public storage::Store {
 public:
  S3Store(const storage::StoreOptions& options, int list_page_size)
      : client_(std::make_shared<S3Client>(options)), list_page_size_(std::clamp(list_page_size, 1, 1000)) {}

  std::string_view name() const override { return "s3"; }

  std::optional<storage::ObjectInfo> stat(const Location& object) override {
    check_object(object);
    return head_object(*client_, object);
  }

  void read(const Location& object, uint64_t offset, std::span<std::byte> out) override {
    check_object(object);
    if (out.empty()) return;
    const uint64_t last = checked_add(offset, uint64_t{out.size()} - 1, "the last byte of a read");
    S3Request get = request("GET", object);
    get.headers.emplace_back("range", fmt::format("bytes={}-{}", offset, last));
    get.body_into = out;
    const HttpResponse response = client_->send(get);
    if (response.status == 404) throw not_found(object, get, response);
    if (response.status == 416) throw past_end(object, offset, out.size(), response);
    if (!response.ok()) throw client_->error(get, response, "reading");
    if (response.bytes_into != out.size()) throw past_end(object, offset, out.size(), response);
  }

  void read_ranges(const Location& object, std::span<const storage::RangeRead> ranges) override {
    check_object(object);
    read_ranges_concurrently(ranges, client_->options().concurrency,
                             [&](uint64_t offset, std::span<std::byte> out) { read(object, offset, out); });
  }

  std::string read_all(const Location& object, uint64_t limit) override {
    check_object(object);
    for (int attempt = 1;; ++attempt) {
      const std::optional<storage::ObjectInfo> info = head_object(*client_, object);
      if (!info) throw not_found(object);
      if (info->size > limit) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("{} is {} bytes, more than the {} bytes it may have to be read whole", object.str(),
                                info->size, limit));
      }
      std::string bytes(info->size, '\0');
      if (bytes.empty()) return bytes;
      S3Request get = request("GET", object);
      get.headers.emplace_back("range", fmt::format("bytes=0-{}", info->size - 1));
      // The object the HEAD saw, or a 412 when it was replaced in between.
      if (!info->version.empty())
        get.headers.emplace_back("if-match", info->version.substr(0, info->version.find(' ')));
      get.body_into = std::as_writable_bytes(std::span(bytes));
      const HttpResponse response = client_->send(get);
      const bool replaced = response.status == 412 || response.status == 416 ||
                            (response.ok() && response.bytes_into != bytes.size());
      if (replaced && attempt < kReadAllAttempts) continue;
      if (response.status == 404) throw not_found(object, get, response);
      if (!response.ok()) throw client_->error(get, response, "reading");
      if (response.bytes_into != bytes.size()) {
        throw Error(ErrorCode::kIo, fmt::format("{}: the object changed while it was read", object.str()));
      }
      return bytes;
    }
  }

  void write_all(const Location& object, std::string_view bytes, IfExists if_exists) override {
    check_object(object);
    // Some S3-compatible stores ignore If-None-Match: ask first as well.
    if (if_exists == IfExists::kFail && head_object(*client_, object)) already_exists(object);
    S3Request put = request("PUT", object);
    put.body = std::as_bytes(std::span(bytes));
    if (if_exists == IfExists::kFail) put.headers.emplace_back("if-none-match", "*");
    int attempts = 0;
    const HttpResponse response = client_->send(put, &attempts);
    if (response.ok()) return;
    if (response.status == 412) {
      // A retry after a PUT whose answer was lost finds its own object.
      if (attempts > 1) {
        const auto info = head_object(*client_, object);
        if (info && info->size == bytes.size() && info->version.starts_with(fmt::format("\"{}\"", md5_hex(bytes))))
          return;
      }
      already_exists(object);
    }
    throw client_->error(put, response, "writing");
  }

  std::vector<storage::ListEntry> list(const Location& prefix) override {
    check_store(prefix);
    const std::string folder = prefix.key().empty() ? std::string() : prefix.key() + "/";
    std::vector<storage::ListEntry> entries;
    std::optional<std::string> token;
    do {
      const ObjectListPage page = list_page(prefix, folder, token, list_page_size_);
      for (const ObjectListPage::Object& object : page.objects) {
        // Folder markers ("a/b/", as consoles make) are no objects.
        if (!object.key.starts_with(folder) || object.key.ends_with('/')) continue;
        entries.push_back({object.key.substr(folder.size()), object.size});
      }
      token = page.next_continuation_token;
    } while (token);
    std::sort(entries.begin(), entries.end(),
              [](const storage::ListEntry& a, const storage::ListEntry& b) { return a.name < b.name; });
    return entries;
  }

  void remove(const Location& object) override {
    check_object(object);
    const S3Request del = request("DELETE", object);
    const HttpResponse response = client_->send(del);
    if (response.ok()) return;
    const auto error = parse_s3_error(response.body);
    if (response.status == 404 && !(error && error->code == "NoSuchBucket")) return;
    throw client_->error(del, response, "removing");
  }

  storage::PartRules part_rules() const override { return storage::s3_part_rules(); }

  std::unique_ptr<storage::ParallelUpload> start_upload(const Location& object, const storage::PartLayout& layout,
                                                        IfExists if_exists) override {
    check_object(object);
    check_layout(object, layout);
    if (if_exists == IfExists::kFail && head_object(*client_, object)) already_exists(object);
    S3Request post = request("POST", object);
    post.query = {{"uploads", ""}};
    const HttpResponse response = client_->send(post);
    if (!response.ok()) throw client_->error(post, response, "starting an upload");
    std::string upload_id = parse_upload_id(response.body);
    if (upload_id.empty()) {
      throw Error(storage::kStoreError,
                  fmt::format("{}: the S3 store gave no UploadId for a new upload", object.str()));
    }
    return std::make_unique<S3Upload>(client_, object, layout, std::move(upload_id), if_exists, true);
  }

  std::unique_ptr<storage::ParallelUpload> join_upload(const Location& object, const storage::PartLayout& layout,
                                                       std::string_view handle) override {
    check_object(object);
    check_layout(object, layout);
    if (handle.empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: an empty upload handle", object.str()));
    }
    return std::make_unique<S3Upload>(client_, object, layout, std::string(handle), IfExists::kReplace, false);
  }

  size_t abort_stale_uploads(const Location& object) override {
    check_object(object);
    size_t removed = 0;
    for_each_unfinished_upload(object.bucket(), object.key(), [&](const UploadListPage::Upload& upload) {
      if (upload.key != object.key()) return;
      S3Request del = request("DELETE", object);
      del.query = {{"uploadId", upload.upload_id}};
      const HttpResponse answer = client_->send(del);
      if (answer.ok()) ++removed;
      else if (answer.status != 404) throw client_->error(del, answer, "aborting an unfinished upload");
    });
    return removed;
  }

  std::vector<std::string> unfinished_uploads(const Location& where) override {
    check_store(where);
    std::string folder = where.key();
    if (!folder.empty() && !folder.ends_with('/')) folder += '/';
    std::vector<std::string> keys;
    for_each_unfinished_upload(where.bucket(), where.key(), [&](const UploadListPage::Upload& upload) {
      if (upload.key == where.key() || upload.key.starts_with(folder)) keys.push_back(upload.key);
    });
    return keys;
  }

 private:
  // `visit` on each multipart upload of `bucket` started and not finished
  // whose key starts with `prefix`, page by page.
  template <class Visit>
  void for_each_unfinished_upload(const std::string& bucket, const std::string& prefix, Visit&& visit) {
    UploadListPage page;
    do {
      S3Request get = bucket_request("GET", bucket);
      // No encoding-type=url: SeaweedFS declares it here but sends keys unencoded.
      get.query = {{"uploads", ""}, {"prefix", prefix}};
      if (page.truncated) {
        get.query.emplace_back("key-marker", page.next_key_marker);
        get.query.emplace_back("upload-id-marker", page.next_upload_id_marker);
      }
      const HttpResponse response = client_->send(get);
      if (!response.ok()) throw client_->error(get, response, "listing unfinished uploads");
      page = parse_list_uploads(response.body);
      for (const UploadListPage::Upload& upload : page.uploads) visit(upload);
    } while (page.truncated);
  }

  static S3Request request(std::string method, const Location& where) {
    S3Request request;
    request.method = std::move(method);
    request.bucket = where.bucket();
    request.key = where.key();
    return request;
  }

  static S3Request bucket_request(std::string method, const std::string& bucket) {
    S3Request request;
    request.method = std::move(method);
    request.bucket = bucket;
    return request;
  }

  static void check_store(const Location& where) {
    if (where.scheme() != storage::Scheme::kS3 || where.bucket().empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is not an s3:// place", where.str()));
    }
  }

  static void check_object(const Location& object) {
    check_store(object);
    if (object.key().empty()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is a bucket, not an object", object.str()));
    }
    // libcurl resolves "." and ".." in a URL's path, so such a key would be
    // sent as another one (and its signature would not match).
    const std::string slashed = fmt::format("/{}/", object.key());
    if (slashed.find("/./") != std::string::npos || slashed.find("/../") != std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: reshard does not reach S3 keys with '.' or '..' parts", object.str()));
    }
  }

  static void check_layout(const Location& object, const storage::PartLayout& layout) {
    const storage::PartRules rules = storage::s3_part_rules();
    if (layout.count() > rules.max_parts || layout.part_bytes() > rules.max_part_bytes ||
        (layout.count() > 1 && layout.part_bytes() < rules.min_part_bytes)) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} parts of {} bytes are outside S3's limits (5 MiB to 5 GiB a part but the "
                              "last, at most 10,000 parts)",
                              object.str(), layout.count(), layout.part_bytes()));
    }
  }

  ObjectListPage list_page(const Location& where, const std::string& prefix, const std::optional<std::string>& token,
                           int max_keys) {
    S3Request get = bucket_request("GET", where.bucket());
    get.query = {{"list-type", "2"}, {"prefix", prefix}, {"encoding-type", "url"},
                 {"max-keys", std::to_string(max_keys)}};
    if (token) get.query.emplace_back("continuation-token", *token);
    const HttpResponse response = client_->send(get);
    if (!response.ok()) {
      S3Request named = get;
      named.key = where.key();
      throw client_->error(named, response, "listing");
    }
    return parse_list_objects(response.body);
  }

  // No object at `object`: says so, and says when the key is a folder.
  Error not_found(const Location& object) {
    const ObjectListPage page = list_page(object, object.key() + "/", std::nullopt, 1);
    if (!page.objects.empty()) {
      return Error(storage::kObjectNotFound,
                   fmt::format("{}: no such object; it is a folder (a prefix with objects under it)", object.str()));
    }
    return Error(storage::kObjectNotFound, fmt::format("{}: no such object", object.str()));
  }

  Error not_found(const Location& object, const S3Request& request, const HttpResponse& response) {
    const auto error = parse_s3_error(response.body);
    if (error && error->code != "NoSuchKey") return client_->error(request, response, "reading");
    return not_found(object);
  }

  Error past_end(const Location& object, uint64_t offset, size_t size, const HttpResponse& response) {
    std::string total;
    if (const auto range = response.header("content-range"); range && range->find('/') != std::string::npos) {
      total = fmt::format(" (it has {} bytes)", range->substr(range->find('/') + 1));
    } else if (const auto info = head_object(*client_, object)) {
      total = fmt::format(" (it has {} bytes)", info->size);
    }
    return Error(ErrorCode::kIo, fmt::format("{}: reading bytes {} to {}: the object ends before that{}", object.str(),
                                             offset, offset + size, total));
  }

  std::shared_ptr<S3Client> client_;
  int list_page_size_;
};

}  // namespace

std::shared_ptr<storage::Store> make_s3_store(const storage::StoreOptions& options) {
  return make_s3_store(options, 1000);
}

std::shared_ptr<storage::Store> make_s3_store(const storage::StoreOptions& options, int list_page_size) {
  return std::make_shared<S3Store>(options, list_page_size);
}

}  // namespace reshard::storage_detail
