// How the processes of a collective file operation agree that every one of
// them succeeded: each shares its error (empty when none) and some numbers.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/execute/transport.h"

namespace reshard::pipelines_detail {

// One process's report.
struct Report {
  std::string error;             // empty: it succeeded
  std::vector<uint64_t> values;  // e.g. checksums
};

// Collective: every process's report, by rank.
std::vector<Report> exchange_reports(Transport& transport, const Report& mine);

// Throws unless every report is clean: this process's own error `own` again
// when it has one, else Error(kPeerFailed) naming the first process that
// failed and its message, in the context `what`.
void require_all_succeeded(const std::vector<Report>& reports, int rank, std::string_view what,
                           std::exception_ptr own);

// A step's failure, kept to be reported to the peers and rethrown here.
struct Failure {
  std::exception_ptr error;
  std::string message;
  explicit operator bool() const { return error != nullptr; }
};

// Runs `step` unless an earlier step failed; records its failure.
template <typename Step>
void run_step(Failure& failure, Step&& step) {
  if (failure) return;
  try {
    step();
  } catch (const std::exception& e) {
    failure.error = std::current_exception();
    failure.message = e.what()[0] == '\0' ? std::string("unknown error") : std::string(e.what());
  }
}

}  // namespace reshard::pipelines_detail
