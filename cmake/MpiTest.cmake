# reshard_add_mpi_test(TARGET RANKS n...) registers TARGET to run under mpiexec
# at each rank count (as KaMPIng's kamping_register_mpi_test does). Runs as root
# and oversubscribed, so it works in CI containers with two cores.
function(reshard_add_mpi_test target)
  cmake_parse_arguments(ARG "" "TIMEOUT" "RANKS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  foreach(ranks IN LISTS ARG_RANKS)
    set(name "${target}.np${ranks}")
    add_test(NAME ${name}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${name} PROPERTIES
      TIMEOUT ${ARG_TIMEOUT}
      PROCESSORS ${ranks}
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  endforeach()
endfunction()
