# The outside-project test: installs the already built tree into a fresh
# prefix, takes the first ```cpp block of README.md as it stands, builds it as
# a separate project with find_package(reshard), and runs it. Arguments
# (-D): SOURCE_DIR, BUILD_DIR, WORK_DIR, GENERATOR, CXX, CXX_FLAGS.
cmake_minimum_required(VERSION 3.25)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# The example, exactly as the README shows it.
file(READ "${SOURCE_DIR}/README.md" readme)
string(FIND "${readme}" "```cpp\n" start)
if(start EQUAL -1)
  message(FATAL_ERROR "README.md has no ```cpp block")
endif()
math(EXPR start "${start} + 7")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "\n```" end)
math(EXPR end "${end} + 1")
string(SUBSTRING "${rest}" 0 ${end} example)
file(WRITE "${WORK_DIR}/readme_example.cpp" "${example}")

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
include("${CMAKE_CURRENT_LIST_DIR}/check_installed_headers.cmake")
check_installed_headers("${WORK_DIR}/prefix" "${SOURCE_DIR}/docs/api.md")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/package" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    "-DEXAMPLE_SOURCE=${WORK_DIR}/readme_example.cpp" -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/readme_example")
message(STATUS "${last_output}")
if(NOT last_output MATCHES "every element in place")
  message(FATAL_ERROR "the README example did not report success:\n${last_output}")
endif()
run("${WORK_DIR}/build/pipelines_example")
if(NOT last_output MATCHES "every pipeline ran")
  message(FATAL_ERROR "the pipelines example did not report success:\n${last_output}")
endif()
if(EXISTS "${WORK_DIR}/build/mpi_example")
  run("${WORK_DIR}/build/mpi_example")
endif()
