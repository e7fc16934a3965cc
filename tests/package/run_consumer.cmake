# The outside-project test: installs the already built tree into a fresh
# prefix, takes every C++ program of README.md and docs/*.md as it stands, builds them as
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

# The examples, exactly as the pages show them: every ```cpp block of README.md
# and docs/*.md that is a whole program (it has a main), each built and run.
# A C++ block without main is a fragment of a page's prose, not run here.
file(GLOB doc_pages "${SOURCE_DIR}/docs/*.md")
list(SORT doc_pages)
set(example_sources "")
set(index 0)
foreach(page IN ITEMS "${SOURCE_DIR}/README.md" ${doc_pages})
  file(READ "${page}" text)
  # A program's text may hold ';', which a CMake list would split: take blocks one at a time.
  string(REPLACE "${SOURCE_DIR}/" "" where "${page}")
  while(TRUE)
    string(FIND "${text}" "```cpp\n" start)
    if(start EQUAL -1)
      break()
    endif()
    math(EXPR start "${start} + 7")
    string(SUBSTRING "${text}" ${start} -1 text)
    string(FIND "${text}" "\n```" end)
    math(EXPR end "${end} + 1")
    string(SUBSTRING "${text}" 0 ${end} block)
    string(SUBSTRING "${text}" ${end} -1 text)
    if(block MATCHES "int main\\(")
      file(WRITE "${WORK_DIR}/example_${index}.cpp" "// from ${where}\n${block}")
      list(APPEND example_sources "${WORK_DIR}/example_${index}.cpp")
      math(EXPR index "${index} + 1")
    endif()
  endwhile()
endforeach()
# '|' between the files: a ';' list would come apart into separate arguments on the way.
string(REPLACE ";" "|" example_list "${example_sources}")
if(index LESS 2)
  message(FATAL_ERROR "README.md or docs/api.md lost its C++ program (found ${index})")
endif()

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
include("${CMAKE_CURRENT_LIST_DIR}/check_installed_headers.cmake")
check_installed_headers("${WORK_DIR}/prefix" "${SOURCE_DIR}/docs/api.md")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/package" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
    "-DEXAMPLE_SOURCES=${example_list}" -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
math(EXPR last "${index} - 1")
foreach(i RANGE ${last})
  run("${WORK_DIR}/build/doc_example_${i}")
  message(STATUS "${last_output}")
  if(NOT last_output MATCHES "every element in place")
    message(FATAL_ERROR "example_${i}.cpp (a README or docs/ program) did not report success:\n${last_output}")
  endif()
endforeach()
run("${WORK_DIR}/build/pipelines_example")
if(NOT last_output MATCHES "every pipeline ran")
  message(FATAL_ERROR "the pipelines example did not report success:\n${last_output}")
endif()
if(EXISTS "${WORK_DIR}/build/mpi_example")
  run("${WORK_DIR}/build/mpi_example")
endif()
