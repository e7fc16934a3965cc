// RESHARD_LOG=debug: one line on stderr per HTTP request to an object store
// (method, host and path, status, bytes, time). The query string and every
// header are left out, so a line never holds a credential, a token or a
// signature, whatever the request carried.
#pragma once

#include <chrono>

#include "storage/http/http_client.h"

namespace reshard::storage_detail {

// Whether RESHARD_LOG asks for debug lines (read once).
bool debug_logging();

// Logs `request`'s outcome when debug_logging().
void log_request(const HttpRequest& request, const HttpResponse& response, std::chrono::steady_clock::duration took);

}  // namespace reshard::storage_detail
