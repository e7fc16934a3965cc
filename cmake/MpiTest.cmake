# reshard_add_mpi_test(TARGET RANKS n... [MPI_PATH_RANKS n...]) registers TARGET
# to run under mpiexec at each rank count (as KaMPIng's kamping_register_mpi_test
# does). Runs as root and oversubscribed, so it works in CI containers with two
# cores. MPI_PATH_RANKS runs it again at those counts with the same-host
# single-copy path off (RESHARD_SINGLE_COPY=0), so that MPI's own path, which
# ranks on different hosts take, is tested on one host too; KERNEL_COPY_RANKS
# with the shared-memory mapping off (RESHARD_SHARED_MEMORY=0), so that the
# kernel copy (process_vm_readv) carries every same-host message;
# RECEIVERS_READ_RANKS with senders never writing into their receivers
# (RESHARD_SENDERS_WRITE=0), so that receivers read every shared-memory message.
function(reshard_add_mpi_test target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "RANKS;MPI_PATH_RANKS;KERNEL_COPY_RANKS;RECEIVERS_READ_RANKS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(environment "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  foreach(ranks IN LISTS ARG_RANKS)
    _reshard_mpi_test_at("${target}.np${ranks}" ${target} ${ranks} ${ARG_TIMEOUT} "${environment}")
  endforeach()
  foreach(ranks IN LISTS ARG_MPI_PATH_RANKS)
    _reshard_mpi_test_at("${target}.np${ranks}.mpi_path" ${target} ${ranks} ${ARG_TIMEOUT}
                         "${environment};RESHARD_SINGLE_COPY=0")
  endforeach()
  foreach(ranks IN LISTS ARG_KERNEL_COPY_RANKS)
    _reshard_mpi_test_at("${target}.np${ranks}.kernel_copy" ${target} ${ranks} ${ARG_TIMEOUT}
                         "${environment};RESHARD_SHARED_MEMORY=0")
  endforeach()
  foreach(ranks IN LISTS ARG_RECEIVERS_READ_RANKS)
    _reshard_mpi_test_at("${target}.np${ranks}.receivers_read" ${target} ${ranks} ${ARG_TIMEOUT}
                         "${environment};RESHARD_SENDERS_WRITE=0")
  endforeach()
endfunction()

function(_reshard_mpi_test_at name target ranks timeout environment)
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe
                   ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout} PROCESSORS ${ranks} ENVIRONMENT "${environment}")
endfunction()
