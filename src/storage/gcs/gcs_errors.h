// A GCS JSON API failure as an error of storage_error.h's kinds.
#pragma once

#include <string>
#include <string_view>

#include "reshard/layout/error.h"
#include "storage/http/http_client.h"

namespace reshard::storage_detail {

// The error for a failed `response` about `place` ("gs://b/k"): no answer, or
// retryable statuses past the retry budget -> kStoreUnreachable naming
// `endpoint`; 401/403 -> kAccessDenied naming `credential_source`; 404 ->
// kObjectNotFound; 412 -> kAlreadyExists; others -> kStoreError with the
// status and the JSON error's reason and message.
Error gcs_error(const HttpResponse& response, std::string_view place, std::string_view endpoint,
                std::string_view credential_source);

// "HTTP 403 (forbidden): the message" from a JSON API error body.
std::string gcs_status_text(const HttpResponse& response);

}  // namespace reshard::storage_detail
