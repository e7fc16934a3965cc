#include "storage/support/fault_proxy_process.h"

#include <stdexcept>

#include "storage/http/http_client.h"

namespace reshard::testing {
namespace {

std::string control(const std::string& url, const std::string& method, const std::string& body) {
  storage_detail::HttpClient http;
  storage_detail::HttpRequest request;
  request.method = method;
  request.url = url;
  request.headers = {{"Content-Type", "application/json"}};
  request.body = std::as_bytes(std::span(body));
  const storage_detail::HttpResponse response = http.send(request);
  if (!response.ok()) {
    throw std::runtime_error("the fault proxy refused " + method + " " + url + ": " + std::to_string(response.status) +
                             " " + response.body + response.transport_error);
  }
  return response.body;
}

}  // namespace

FaultProxyProcess::FaultProxyProcess(const std::string& target) {
  const auto state = dir_ / "proxy.json";
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{test_python(), (test_servers_dir() / "fault_proxy.py").string(), "--target", target,
                               "--state", state.string()},
      dir_ / "proxy.log");
  url_ = process_->wait_for_json(state).at("url").get<std::string>();
}

void FaultProxyProcess::add_rule(const nlohmann::json& rule) const {
  control(url_ + "/__fault__/rules", "POST", rule.dump());
}

nlohmann::json FaultProxyProcess::log() const {
  return nlohmann::json::parse(control(url_ + "/__fault__/log", "GET", ""));
}

}  // namespace reshard::testing
