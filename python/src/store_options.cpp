// The options every object-store client of the process opens with
// (storage::set_default_store_options): what the command line's --timeout
// sets, for Python programs.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include "bindings.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::python {
namespace {

std::chrono::milliseconds timeout_from_seconds(double seconds) {
  // Under a millisecond, or beyond what a 64-bit count of them holds, is no timeout a store can keep.
  if (!std::isfinite(seconds) || seconds < 0.001 || seconds > 1e12) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("timeout: {} seconds: give a finite number of seconds, at least 0.001", seconds));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

void set_store_options(std::optional<double> timeout, std::optional<int64_t> concurrency) {
  storage::StoreOptions options = storage::default_store_options();
  if (timeout) options.timeout = timeout_from_seconds(*timeout);
  if (concurrency) {
    if (*concurrency < 1 || *concurrency > 1024) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("concurrency: {}: give 1 to 1024 requests in flight", *concurrency));
    }
    options.concurrency = static_cast<uint32_t>(*concurrency);
  }
  storage::set_default_store_options(options);
}

std::tuple<double, int64_t> store_options() {
  const storage::StoreOptions options = storage::default_store_options();
  return {static_cast<double>(options.timeout.count()) / 1000.0, options.concurrency};
}

}  // namespace

void bind_store_options(nb::module_& m) {
  m.def("_set_store_options", &set_store_options, nb::arg("timeout").none(), nb::arg("concurrency").none(),
        "Sets the options object-store clients opened from now on use (None keeps one as it is).");
  m.def("_store_options", &store_options, "(timeout in seconds, requests in flight per ranged read).");
}

}  // namespace reshard::python
