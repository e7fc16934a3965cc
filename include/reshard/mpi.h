// reshard's MPI transport, in one header: link reshard::mpi (and reshard::reshard).
#pragma once

#include "reshard/execute/mpi/mpi_session.h"
#include "reshard/execute/mpi/mpi_transport.h"
#include "reshard/reshard.h"
