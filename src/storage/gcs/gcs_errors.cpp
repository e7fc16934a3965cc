#include "storage/gcs/gcs_errors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reshard/storage/storage_error.h"
#include "storage/http/retry.h"

namespace reshard::storage_detail {

std::string gcs_status_text(const HttpResponse& response) {
  std::string reason;
  std::string message;
  try {
    const nlohmann::json body = nlohmann::json::parse(response.body);
    const nlohmann::json& error = body.at("error");
    message = error.value("message", std::string());
    if (error.contains("errors") && error["errors"].is_array() && !error["errors"].empty()) {
      reason = error["errors"][0].value("reason", std::string());
    }
  } catch (const nlohmann::json::exception&) {
    // Not the JSON API's error shape (a proxy's page): its first line says enough.
    message = response.body.substr(0, std::min(response.body.find('\n'), size_t{200}));
  }
  std::string out = fmt::format("HTTP {}", response.status);
  if (!reason.empty()) out += fmt::format(" ({})", reason);
  if (!message.empty()) out += ": " + message;
  return out;
}

Error gcs_error(const HttpResponse& response, std::string_view place, std::string_view endpoint,
                std::string_view credential_source) {
  if (response.status == 0) {
    return Error(storage::kStoreUnreachable,
                 fmt::format("{}: the GCS endpoint {} did not answer: {}", place, endpoint, response.transport_error));
  }
  const std::string status = gcs_status_text(response);
  switch (response.status) {
    case 401:
    case 403:
      return Error(storage::kAccessDenied,
                   fmt::format("{}: access denied ({}) with the credentials of {}", place, status, credential_source));
    case 404: return Error(storage::kObjectNotFound, fmt::format("{}: no such object", place));
    case 412: return Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", place));
    default: break;
  }
  if (is_retryable(response)) {
    return Error(
        storage::kStoreUnreachable,
        fmt::format("{}: the GCS endpoint {} kept failing past the retry budget: {}", place, endpoint, status));
  }
  return Error(storage::kStoreError, fmt::format("{}: the store refused the request: {}", place, status));
}

}  // namespace reshard::storage_detail
