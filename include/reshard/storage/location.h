// Where bytes live: a local path, or an object (or a prefix of objects) in a
// store named by URL: s3://BUCKET/KEY, gs://BUCKET/KEY, memory://NAME/KEY.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace reshard::storage {

// The kinds of place reshard reads and writes.
enum class Scheme {
  kLocal,   // a POSIX path (also written file:///path)
  kS3,      // s3://bucket/key: the S3 protocol (AWS and compatible stores)
  kGcs,     // gs://bucket/key: Google Cloud Storage's JSON API
  kMemory,  // memory://name/key: an in-process store, for tests
};

// "local", "s3", "gs", "memory".
std::string_view scheme_name(Scheme scheme);

// A parsed place. A value: cheap to copy, compared by its text. For objects
// the key never starts or ends with '/', so "s3://b/model/" and "s3://b/model"
// are the same folder, and child("x") is always "s3://b/model/x".
class Location {
 public:
  // The current folder (a local path that is empty).
  Location() = default;
  // A local path, as given (never parsed as a URL: an std::filesystem::path
  // is a path). Implicit, so that every API taking a Location takes a path.
  Location(const std::filesystem::path& path);  // NOLINT(google-explicit-constructor)
  // Parses a path or URL. Local paths are taken as they are. Refused with
  // Error(kInvalidArgument), naming the text: a scheme reshard does not read
  // ("hf://", "http://", ...), "file://HOST/..." with a host other than
  // localhost, a URL with no bucket, and "s3:..." / "gs:..." without "//"
  // (never taken for a local folder named "s3:"). Empty text is refused too.
  static Location parse(std::string_view text);
  // A local path, as given.
  static Location local(std::filesystem::path path);
  // An object or prefix `key` in `bucket` of a store of `scheme` (not kLocal).
  static Location object(Scheme scheme, std::string bucket, std::string key);

  Scheme scheme() const { return scheme_; }
  bool is_local() const { return scheme_ == Scheme::kLocal; }
  // The bucket (empty for local paths).
  const std::string& bucket() const { return bucket_; }
  // The object key without leading or trailing '/' (empty: the bucket's root),
  // or the local path's text.
  const std::string& key() const { return key_; }
  // The local path (Error(kInvalidArgument) for an object).
  std::filesystem::path local_path() const;

  // `name` (one or more '/'-separated parts) under this place.
  Location child(std::string_view name) const;
  // The place this one is in ("s3://b/a/b" -> "s3://b/a"; a bucket's root is
  // its own parent).
  Location parent() const;
  // The last part of the key or path ("model.safetensors"), empty at a root.
  std::string name() const;

  // The text a user would write: the path, or "s3://bucket/key".
  std::string str() const;

  friend bool operator==(const Location& a, const Location& b) = default;

 private:
  Location(Scheme scheme, std::string bucket, std::string key);

  Scheme scheme_ = Scheme::kLocal;
  std::string bucket_;
  std::string key_;
};

}  // namespace reshard::storage
