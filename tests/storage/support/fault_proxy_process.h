// tests/storage/servers/fault_proxy.py run by a test in front of a store: an
// endpoint that injects the faults the test asks for (503, 429, resets,
// stalls) and logs every request. Stopped by its process id when the object goes.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "storage/support/child_process.h"
#include "support/temp_dir.h"

namespace reshard::testing {

class FaultProxyProcess {
 public:
  // A proxy forwarding to `target` ("http://127.0.0.1:PORT").
  explicit FaultProxyProcess(const std::string& target);

  // The proxy's base URL, to use as the store's endpoint.
  const std::string& url() const { return url_; }
  // Appends a rule (see fault_proxy.py): {"kind": "status", "status": 503, "path": "alt=media", ...}.
  void add_rule(const nlohmann::json& rule) const;
  // Every request so far: [{"method", "path", "status", "fault", ...}].
  nlohmann::json log() const;

 private:
  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
  std::string url_;
};

}  // namespace reshard::testing
