#include "reshard/storage/location.h"

#include <cctype>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/ascii_lower.h"

namespace reshard::storage {
namespace {

using storage_detail::ascii_lower;

[[noreturn]] void refuse(std::string_view text, std::string_view why) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {}", text, why));
}

// "s3" for "s3://..." or "s3:..."; empty when the text starts with no scheme.
// A scheme is a letter, then letters, digits, '+', '-' or '.', then ':'.
std::string_view leading_scheme(std::string_view text) {
  if (text.empty() || !std::isalpha(static_cast<unsigned char>(text[0]))) return {};
  for (size_t i = 1; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == ':') return text.substr(0, i);
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return {};
  }
  return {};
}

// Drops leading and trailing '/' and folds repeated ones, so that one object
// or folder has one key.
std::string normal_key(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '/' && (out.empty() || out.back() == '/')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

void check_bucket(std::string_view text, std::string_view scheme, std::string_view bucket) {
  if (bucket.empty()) refuse(text, fmt::format("a {}:// URL needs a bucket: {}://BUCKET/KEY", scheme, scheme));
  for (const char c : bucket) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '-' && c != '.' && c != '_') {
      refuse(text, fmt::format("the bucket name {:?} has a character bucket names cannot have", std::string(bucket)));
    }
  }
}

Location parse_object_url(std::string_view text, Scheme scheme, std::string_view rest) {
  const size_t slash = rest.find('/');
  const std::string_view bucket = rest.substr(0, slash);
  check_bucket(text, scheme_name(scheme), bucket);
  const std::string_view key = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  for (const char c : key) {
    if (c == '\0' || c == '\n' || c == '\r') refuse(text, "an object key cannot hold control characters");
  }
  return Location::object(scheme, std::string(bucket), std::string(key));
}

// file:///path, file://localhost/path and file:/path are local paths; a file
// URL naming another host is not something reshard can reach.
Location parse_file_url(std::string_view text) {
  std::string_view rest = text.substr(5);  // after "file:"
  if (rest.starts_with("//")) {
    rest.remove_prefix(2);
    const size_t slash = rest.find('/');
    const std::string_view host = rest.substr(0, slash);
    if (!host.empty() && ascii_lower(host) != "localhost") {
      refuse(text, fmt::format("a file:// URL on another host ({}) is not a local path", std::string(host)));
    }
    if (slash == std::string_view::npos) refuse(text, "a file:// URL needs a path");
    rest = rest.substr(slash);
  }
  if (!rest.starts_with('/')) refuse(text, "a file: URL needs an absolute path (file:///path)");
  return Location::local(std::filesystem::path(std::string(rest)));
}

}  // namespace

std::string_view scheme_name(Scheme scheme) {
  switch (scheme) {
    case Scheme::kLocal: return "local";
    case Scheme::kS3: return "s3";
    case Scheme::kGcs: return "gs";
    case Scheme::kMemory: return "memory";
  }
  return "?";
}

Location::Location(Scheme scheme, std::string bucket, std::string key)
    : scheme_(scheme), bucket_(std::move(bucket)), key_(std::move(key)) {}

Location Location::parse(std::string_view text) {
  if (text.empty()) throw Error(ErrorCode::kInvalidArgument, "an empty path names no file or folder");
  const std::string scheme = ascii_lower(leading_scheme(text));
  if (scheme.empty()) return local(std::filesystem::path(std::string(text)));
  if (scheme == "file") return parse_file_url(text);
  const std::string_view after_colon = text.substr(scheme.size() + 1);
  const bool has_slashes = after_colon.starts_with("//");
  const bool known = scheme == "s3" || scheme == "gs" || scheme == "memory";
  if (known && !has_slashes) {
    // "s3:/b/k" is what a path library makes of "s3://b/k": suggest the URL.
    std::string_view rest = after_colon;
    while (rest.starts_with('/')) rest.remove_prefix(1);
    refuse(text, fmt::format("not a URL and not taken as a local path; did you mean {}://{}?", scheme,
                             std::string(rest)));
  }
  if (!has_slashes) return local(std::filesystem::path(std::string(text)));
  const std::string_view rest = after_colon.substr(2);
  if (scheme == "s3") return parse_object_url(text, Scheme::kS3, rest);
  if (scheme == "gs") return parse_object_url(text, Scheme::kGcs, rest);
  if (scheme == "memory") return parse_object_url(text, Scheme::kMemory, rest);
  refuse(text, fmt::format("reshard does not read or write {}:// (it takes local paths, s3:// and gs://)", scheme));
}

Location::Location(const std::filesystem::path& path) : key_(path.string()) {}

Location Location::local(std::filesystem::path path) { return Location(path); }

Location Location::object(Scheme scheme, std::string bucket, std::string key) {
  if (scheme == Scheme::kLocal) {
    throw Error(ErrorCode::kInvalidArgument, "Location::object takes an object store's scheme, not a local one");
  }
  return Location(scheme, std::move(bucket), normal_key(key));
}

std::filesystem::path Location::local_path() const {
  if (!is_local()) throw Error(ErrorCode::kInvalidArgument, fmt::format("{} is not a local path", str()));
  return std::filesystem::path(key_);
}

Location Location::child(std::string_view name) const {
  if (is_local()) return local(std::filesystem::path(key_) / std::string(name));
  return object(scheme_, bucket_, key_.empty() ? std::string(name) : fmt::format("{}/{}", key_, name));
}

Location Location::parent() const {
  if (is_local()) return local(std::filesystem::path(key_).parent_path());
  const size_t slash = key_.rfind('/');
  return Location(scheme_, bucket_, slash == std::string::npos ? std::string() : key_.substr(0, slash));
}

std::string Location::name() const {
  if (is_local()) {
    std::filesystem::path path(key_);
    if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
    return path.filename().string();
  }
  const size_t slash = key_.rfind('/');
  return slash == std::string::npos ? key_ : key_.substr(slash + 1);
}

std::string Location::str() const {
  if (is_local()) return key_;
  if (key_.empty()) return fmt::format("{}://{}", scheme_name(scheme_), bucket_);
  return fmt::format("{}://{}/{}", scheme_name(scheme_), bucket_, key_);
}

}  // namespace reshard::storage
