#include "storage/gcs/gcs_objects.h"

#include <charconv>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/storage/storage_error.h"
#include "storage/gcs/gcs_errors.h"

namespace reshard::storage_detail {
namespace {

constexpr std::string_view kWriteIdKey = "reshard-write-id";
constexpr std::string_view kObjectFields = "name,size,generation,metadata";

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

uint64_t parse_size(const nlohmann::json& value, std::string_view place) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  const std::string text = value.is_string() ? value.get<std::string>() : std::string();
  uint64_t size = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), size);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    throw Error(storage::kStoreError, fmt::format("{}: the store gave an object size that is not a number", place));
  }
  return size;
}

GcsObject parse_object(const nlohmann::json& json, std::string_view place) {
  try {
    GcsObject object;
    object.name = json.at("name").get<std::string>();
    object.size = parse_size(json.at("size"), place);
    const nlohmann::json& generation = json.at("generation");
    object.generation = generation.is_string() ? generation.get<std::string>() : generation.dump();
    if (json.contains("metadata") && json["metadata"].is_object()) {
      object.write_id = json["metadata"].value(std::string(kWriteIdKey), std::string());
    }
    return object;
  } catch (const nlohmann::json::exception&) {
    throw Error(storage::kStoreError, fmt::format("{}: the store's object resource lacks name, size or generation",
                                                  place));
  }
}

GcsObject parse_object_body(const HttpResponse& response, std::string_view place) {
  try {
    return parse_object(nlohmann::json::parse(response.body), place);
  } catch (const nlohmann::json::parse_error&) {
    throw Error(storage::kStoreError, fmt::format("{}: the store answered with something that is not JSON", place));
  }
}

HttpRequest json_request(std::string method, std::string url) {
  HttpRequest request;
  request.method = std::move(method);
  request.url = std::move(url);
  request.headers = {{"Accept", "application/json"}};
  return request;
}

// A conditional write's outcome: a 412 after a retry may be our own first
// attempt having landed (its answer lost), which the write id tells.
GcsObject conditional_write_result(const GcsClient& client, const HttpResponse& response, int attempts,
                                   std::string_view bucket, std::string_view key, std::string_view write_id) {
  const std::string place = gs_url(bucket, key);
  if (response.ok()) return parse_object_body(response, place);
  if (response.status == 412 && attempts > 1) {
    const std::optional<GcsObject> there = get_object(client, bucket, key);
    if (there && there->write_id == write_id) return *there;
  }
  if (response.status == 404) throw missing_object_error(client, bucket, key);
  throw client.error(response, place);
}

std::string multipart_body(const nlohmann::json& metadata, std::span<const std::byte> bytes, std::string& boundary) {
  const std::string_view data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  do {
    boundary = "reshard-" + random_hex(16);
  } while (data.find(boundary) != std::string_view::npos);
  std::string body = fmt::format("--{}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{}\r\n--{}\r\n"
                                 "Content-Type: application/octet-stream\r\n\r\n",
                                 boundary, metadata.dump(), boundary);
  body.reserve(body.size() + data.size() + boundary.size() + 8);
  body.append(data);
  body += fmt::format("\r\n--{}--\r\n", boundary);
  return body;
}

}  // namespace

std::string random_hex(size_t bytes) {
  thread_local std::mt19937_64 random(std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32));
  std::string out;
  for (size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", static_cast<unsigned>(random() & 0xFF));
  return out;
}

std::optional<GcsObject> get_object(const GcsClient& client, std::string_view bucket, std::string_view key) {
  const std::string place = gs_url(bucket, key);
  const HttpResponse response = client.send(json_request(
      "GET", fmt::format("{}?fields={}", client.object_url(bucket, key), uri_encode(kObjectFields, false))));
  if (response.status == 404) return std::nullopt;
  if (!response.ok()) throw client.error(response, place);
  return parse_object_body(response, place);
}

bool bucket_exists(const GcsClient& client, std::string_view bucket) {
  // Any answer but 404 (a 403: the credentials may not read bucket metadata) leaves the bucket be.
  const HttpResponse response = client.send(json_request("GET", client.bucket_url(bucket) + "?fields=name"));
  if (response.status == 0) throw client.error(response, gs_url(bucket, ""));
  return response.status != 404;
}

Error missing_object_error(const GcsClient& client, std::string_view bucket, std::string_view key) {
  const std::string place = gs_url(bucket, key);
  if (!bucket_exists(client, bucket)) {
    return Error(storage::kBucketNotFound, fmt::format("{}: the bucket gs://{} does not exist", place, bucket));
  }
  if (!key.empty() && !list_objects(client, bucket, fmt::format("{}/", key), 1).empty()) {
    return Error(storage::kObjectNotFound,
                 fmt::format("{}: no such object (it is a folder: objects lie under {}/)", place, place));
  }
  return Error(storage::kObjectNotFound, fmt::format("{}: no such object", place));
}

GcsObject upload_object(const GcsClient& client, std::string_view bucket, std::string_view key,
                        std::span<const std::byte> bytes, bool must_not_exist) {
  const std::string place = gs_url(bucket, key);
  if (!must_not_exist) {
    HttpRequest request = json_request(
        "POST", fmt::format("{}?uploadType=media&name={}", client.upload_url(bucket), uri_encode(key, false)));
    request.headers.emplace_back("Content-Type", "application/octet-stream");
    request.body = bytes;
    const HttpResponse response = client.send(request);
    if (response.status == 404) throw missing_object_error(client, bucket, key);
    if (!response.ok()) throw client.error(response, place);
    return parse_object_body(response, place);
  }
  // Only a multipart upload carries both the precondition (which
  // fake-gcs-server checks for multipart uploads alone) and the write id.
  const std::string write_id = random_hex(16);
  const nlohmann::json metadata = {{"name", key},
                                   {"contentType", "application/octet-stream"},
                                   {"metadata", {{kWriteIdKey, write_id}}}};
  std::string boundary;
  const std::string body = multipart_body(metadata, bytes, boundary);
  HttpRequest request =
      json_request("POST", fmt::format("{}?uploadType=multipart&ifGenerationMatch=0", client.upload_url(bucket)));
  request.headers.emplace_back("Content-Type", fmt::format("multipart/related; boundary={}", boundary));
  request.body = bytes_of(body);
  int attempts = 0;
  const HttpResponse response = client.send(request, &attempts);
  return conditional_write_result(client, response, attempts, bucket, key, write_id);
}

bool delete_object(const GcsClient& client, std::string_view bucket, std::string_view key) {
  const HttpResponse response = client.send(json_request("DELETE", client.object_url(bucket, key)));
  if (response.status == 404) return false;
  if (!response.ok()) throw client.error(response, gs_url(bucket, key));
  return true;
}

std::vector<GcsObject> list_objects(const GcsClient& client, std::string_view bucket, std::string_view prefix,
                                    size_t limit) {
  const std::string place = gs_url(bucket, prefix);
  std::vector<GcsObject> objects;
  std::string page;
  do {
    const size_t page_size = std::min<size_t>(1000, limit - objects.size());
    std::string url = fmt::format("{}/o?prefix={}&maxResults={}&fields={}", client.bucket_url(bucket),
                                  uri_encode(prefix, false), page_size,
                                  uri_encode("items(name,size,generation),nextPageToken", false));
    if (!page.empty()) url += "&pageToken=" + uri_encode(page, false);
    const HttpResponse response = client.send(json_request("GET", url));
    if (response.status == 404) {
      throw Error(storage::kBucketNotFound, fmt::format("{}: the bucket gs://{} does not exist", place, bucket));
    }
    if (!response.ok()) throw client.error(response, place);
    nlohmann::json body;
    try {
      body = nlohmann::json::parse(response.body);
    } catch (const nlohmann::json::parse_error&) {
      throw Error(storage::kStoreError, fmt::format("{}: the store's listing is not JSON", place));
    }
    if (body.contains("items")) {
      for (const nlohmann::json& item : body["items"]) {
        if (objects.size() == limit) break;
        objects.push_back(parse_object(item, place));
      }
    }
    page = body.value("nextPageToken", std::string());
  } while (!page.empty() && objects.size() < limit);
  return objects;
}

GcsObject compose_objects(const GcsClient& client, std::string_view bucket, std::span<const ComposeSource> sources,
                          std::string_view key, bool must_not_exist) {
  if (sources.empty() || sources.size() > kMaxComposeSources) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a compose takes 1 to {} sources, not {}", gs_url(bucket, key), kMaxComposeSources,
                            sources.size()));
  }
  const std::string write_id = random_hex(16);
  nlohmann::json request_body = {
      {"destination", {{"contentType", "application/octet-stream"}, {"metadata", {{kWriteIdKey, write_id}}}}},
      {"sourceObjects", nlohmann::json::array()}};
  for (const ComposeSource& source : sources) {
    request_body["sourceObjects"].push_back({{"name", source.name}, {"generation", source.generation}});
  }
  const std::string body = request_body.dump();
  HttpRequest request = json_request("POST", fmt::format("{}/compose{}", client.object_url(bucket, key),
                                                         must_not_exist ? "?ifGenerationMatch=0" : ""));
  request.headers.emplace_back("Content-Type", "application/json");
  request.body = bytes_of(body);
  int attempts = 0;
  const HttpResponse response = client.send(request, &attempts);
  if (response.status == 404) {
    // The bucket, or a source (deleted, or replaced since its receipt).
    Error missing = missing_object_error(client, bucket, key);
    if (missing.kind() == storage::kBucketNotFound) throw missing;
    throw Error(storage::kObjectNotFound,
                fmt::format("{}: a source of the compose is missing or was replaced ({})", gs_url(bucket, key),
                            gcs_status_text(response)));
  }
  return conditional_write_result(client, response, attempts, bucket, key, write_id);
}

}  // namespace reshard::storage_detail
