// Assertions on reshard::Error: its code and the words its message must contain.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "reshard/layout/error.h"

namespace reshard::testing {

// Success when `action` throws Error of `kind` (a code, or a layer's finer
// kind such as a file rule) and a message containing every one of `parts`; a
// failure saying what happened instead otherwise.
template <typename Action>
::testing::AssertionResult throws_error(Action&& action, ErrorKind kind,
                                        std::initializer_list<std::string_view> parts = {}) {
  try {
    action();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (!(e.kind() == kind)) {
      return ::testing::AssertionFailure() << "threw " << e.name() << " instead of " << kind.name << ": " << message;
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
  return ::testing::AssertionFailure() << "threw nothing (expected " << kind.name << ")";
}

}  // namespace reshard::testing
