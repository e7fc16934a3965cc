// The reshard::Error a call throws, or nothing: for tests that check an
// error's code and text after the call, beside what it left behind.
#pragma once

#include <optional>

#include "reshard/layout/error.h"

namespace reshard::testing {

template <typename Call>
std::optional<Error> error_of(const Call& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace reshard::testing
