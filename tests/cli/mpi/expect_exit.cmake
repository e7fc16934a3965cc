# Runs the command given after `--` and passes only if it exits with
# EXIT_CODE and its stderr contains ERROR_CONTAINS (and, when given, its
# stdout lacks OUTPUT_LACKS). WILL_FAIL would also pass on a crash: a process
# killed by a signal (mpirun reports 128 + the signal, cmake the signal's
# name) is a failure here. Arguments (-D): EXIT_CODE, ERROR_CONTAINS,
# OUTPUT_LACKS (optional). The command's arguments must not hold a `;`
# (CMake would split them there).
cmake_minimum_required(VERSION 3.25)

set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "no command after --")
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(report "command: ${command}\nexit: ${status}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT status STREQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "expected exit status ${EXIT_CODE}, got ${status}\n${report}")
endif()
string(FIND "${err}" "${ERROR_CONTAINS}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "stderr lacks \"${ERROR_CONTAINS}\"\n${report}")
endif()
if(DEFINED OUTPUT_LACKS)
  string(FIND "${out}" "${OUTPUT_LACKS}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "stdout has \"${OUTPUT_LACKS}\"\n${report}")
  endif()
endif()
message(STATUS "exit status ${status}, and stderr says \"${ERROR_CONTAINS}\"")
