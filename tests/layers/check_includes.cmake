# Checks the include graph between the layers: every #include in src/<layer>/
# and include/reshard/<layer>/ must name a header of its own layer or of one
# it builds on (as CMakeLists.txt links them), and no installed header
# (include/) may include an internal one (src/). Prints which layer includes
# which, and fails on any other include, naming the file and the line.
#   cmake -DSOURCE_DIR=<repository> -P check_includes.cmake
cmake_minimum_required(VERSION 3.25)

set(layers layout plan execute storage formats pipelines job bench demo cli)
# What each layer may include besides itself: the layers it links.
set(allowed_layout "")
set(allowed_plan layout)
set(allowed_execute layout plan)
# Bytes at places need nothing but layout's errors.
set(allowed_storage layout)
# File bytes know boxes and dtypes, never a plan or a transport.
set(allowed_formats layout storage)
set(allowed_pipelines layout plan execute storage formats)
# The job a front end runs as: a transport and the stores' timeouts.
set(allowed_job layout plan execute storage)
# The benchmarks and the demo run as the job, over every layer (internals included).
set(allowed_bench layout plan execute storage formats pipelines job)
set(allowed_demo layout plan execute storage formats pipelines job)
# The front end may include the umbrella header ("api") too.
set(allowed_cli layout plan execute storage formats pipelines job bench demo api)

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_includes.cmake: pass -DSOURCE_DIR=<repository>")
endif()

# The layer a repository file belongs to ("" for none): src/<layer>/... or
# include/reshard/<layer>/...; src/main.cpp is the command line's, and the
# umbrella headers include/reshard/*.h are the API's.
function(layer_of path out)
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${path}")
  set(layer "")
  # One pattern: a second MATCHES in the same if() would reset CMAKE_MATCH_1.
  if(rel MATCHES "^(src|include/reshard)/([a-z_]+)/")
    if(CMAKE_MATCH_2 IN_LIST layers)
      set(layer "${CMAKE_MATCH_2}")
    endif()
  elseif(rel STREQUAL "src/main.cpp")
    set(layer cli)
  elseif(rel MATCHES "^include/reshard/[a-z_]+\\.h$")
    set(layer api)
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

# Where the compiler finds `name` from a file in `dir`: beside it, then in
# include/, then in src/ (every layer's search path). "" for headers outside
# the repository (the standard library, fmt, ...).
function(resolve dir name out)
  set(found "")
  foreach(base IN ITEMS "${dir}" "${SOURCE_DIR}/include" "${SOURCE_DIR}/src")
    if(EXISTS "${base}/${name}" AND NOT IS_DIRECTORY "${base}/${name}")
      get_filename_component(found "${base}/${name}" ABSOLUTE)
      break()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files LIST_DIRECTORIES false "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cpp"
     "${SOURCE_DIR}/include/*.h")
set(violations "")
set(edges "")
foreach(file IN LISTS files)
  layer_of("${file}" from)
  # An installed header may include only installed headers: src/ does not ship.
  string(FIND "${file}" "${SOURCE_DIR}/include/" public_at)
  if(from STREQUAL "" OR (from STREQUAL "api" AND NOT public_at EQUAL 0))
    continue()
  endif()
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "#[ \t]*include[ \t]*[\"<]([^\">]+)[\">]")
      continue()
    endif()
    set(name "${CMAKE_MATCH_1}")
    resolve("${dir}" "${name}" target)
    if(target STREQUAL "")
      continue()
    endif()
    if(public_at EQUAL 0)
      string(FIND "${target}" "${SOURCE_DIR}/src/" internal_at)
      if(internal_at EQUAL 0)
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${file}")
        list(APPEND violations "${rel}: an installed header includes an internal one: ${line}")
      endif()
    endif()
    if(from STREQUAL "api")
      continue()
    endif()
    layer_of("${target}" to)
    if(to STREQUAL "" OR to STREQUAL from)
      continue()
    endif()
    list(APPEND edges "${from} -> ${to}")
    if(NOT to IN_LIST allowed_${from})
      file(RELATIVE_PATH rel "${SOURCE_DIR}" "${file}")
      list(APPEND violations "${rel}: ${from} includes ${to}: ${line}")
    endif()
  endforeach()
endforeach()

# The graph, one line per pair of layers with how many includes make it.
list(SORT edges)
set(summary "")
set(previous "")
set(count 0)
foreach(edge IN LISTS edges ITEMS "")
  if(edge STREQUAL previous)
    math(EXPR count "${count} + 1")
    continue()
  endif()
  if(NOT previous STREQUAL "")
    string(APPEND summary "  ${previous} (${count})\n")
  endif()
  set(previous "${edge}")
  set(count 1)
endforeach()
message(STATUS "includes between layers:\n${summary}")

if(violations)
  list(JOIN violations "\n  " shown)
  message(FATAL_ERROR "includes against the layering (layout < plan < execute < pipelines, "
                      "formats on layout alone, then job < bench, demo < cli; installed headers on installed ones):\n  ${shown}")
endif()
