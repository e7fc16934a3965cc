#include "pipelines/common/agreement.h"

#include <cstring>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

void append_u64(std::vector<std::byte>& out, uint64_t value) {
  const size_t at = out.size();
  out.resize(at + sizeof value);
  std::memcpy(out.data() + at, &value, sizeof value);
}

uint64_t read_u64(std::span<const std::byte> bytes, size_t& at) {
  if (at + sizeof(uint64_t) > bytes.size()) throw Error(ErrorCode::kTransport, "a short report from a peer");
  uint64_t value = 0;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  at += sizeof value;
  return value;
}

}  // namespace

std::vector<Report> exchange_reports(Transport& transport, const Report& mine) {
  std::vector<std::byte> bytes;
  append_u64(bytes, mine.values.size());
  for (uint64_t value : mine.values) append_u64(bytes, value);
  const auto* text = reinterpret_cast<const std::byte*>(mine.error.data());
  bytes.insert(bytes.end(), text, text + mine.error.size());
  std::vector<Report> reports;
  for (const std::vector<std::byte>& theirs : transport.all_gather(bytes)) {
    Report report;
    size_t at = 0;
    const uint64_t count = read_u64(theirs, at);
    if (count > theirs.size() / sizeof(uint64_t)) throw Error(ErrorCode::kTransport, "a malformed report from a peer");
    for (uint64_t i = 0; i < count; ++i) report.values.push_back(read_u64(theirs, at));
    report.error.assign(reinterpret_cast<const char*>(theirs.data()) + at, theirs.size() - at);
    reports.push_back(std::move(report));
  }
  return reports;
}

void require_all_succeeded(const std::vector<Report>& reports, int rank, std::string_view what,
                           std::exception_ptr own) {
  if (own) {
    try {
      std::rethrow_exception(own);
    } catch (const Error& e) {
      throw e.with_context(what);
    }
  }
  (void)rank;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].error.empty()) continue;
    throw Error(ErrorCode::kPeerFailed, fmt::format("{}: process {} failed: {}", what, r, reports[r].error));
  }
}

}  // namespace reshard::pipelines_detail
