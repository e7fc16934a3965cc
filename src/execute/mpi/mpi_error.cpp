#include "mpi_error.h"

#include <mpi.h>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::mpi_detail {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS || length <= 0) {
    return fmt::format("MPI error {}", code);
  }
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return;
  throw Error(ErrorCode::kTransport, fmt::format("{}: {}", what, mpi_error_text(code)));
}

}  // namespace reshard::mpi_detail
