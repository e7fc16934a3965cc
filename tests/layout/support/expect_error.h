// Assertions on reshard::Error: its code and the words its message must contain.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "reshard/layout/error.h"

namespace reshard::testing {

// Success when `action` throws Error with `code` and a message containing every
// one of `parts`; a failure saying what happened instead otherwise.
template <typename Action>
::testing::AssertionResult throws_error(Action&& action, ErrorCode code,
                                        std::initializer_list<std::string_view> parts = {}) {
  try {
    action();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (e.code() != code) {
      return ::testing::AssertionFailure() << "threw " << error_code_name(e.code()) << " instead of "
                                           << error_code_name(code) << ": " << message;
    }
    for (std::string_view part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks '" << part << "': " << message;
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-reshard exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "threw nothing (expected " << error_code_name(code) << ")";
}

}  // namespace reshard::testing
