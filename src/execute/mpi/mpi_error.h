// MPI return codes as reshard errors.
#pragma once

#include <string>
#include <string_view>

namespace reshard::mpi_detail {

// MPI's own text for an error code ("MPI_ERR_TRUNCATE: message truncated").
std::string mpi_error_text(int code);

// Throws Error(kTransport) "what: <MPI's text>" unless `code` is MPI_SUCCESS.
// Needs MPI_ERRORS_RETURN on the communicator, or MPI aborts before we see it.
void check_mpi(int code, std::string_view what);

}  // namespace reshard::mpi_detail
