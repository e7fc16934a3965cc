# reshard_add_layer(NAME [BELOW...]) builds src/NAME/**/*.cpp into the static
# library reshard_NAME, linked against the layers below it. Headers live in
# include/reshard/NAME/. Globbing keeps one-concept-per-file cheap to add.
function(reshard_add_layer name)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/${name}/*.cpp")
  if(NOT RESHARD_WITH_MPI)
    list(FILTER sources EXCLUDE REGEX "/mpi/")
  endif()
  if(NOT sources)
    # A layer with no code yet still forwards the layers below it.
    add_library(reshard_${name} INTERFACE)
    list(TRANSFORM ARGN PREPEND reshard_)
    target_link_libraries(reshard_${name} INTERFACE ${ARGN})
    return()
  endif()
  add_library(reshard_${name} STATIC ${sources})
  target_include_directories(reshard_${name} PUBLIC "${PROJECT_SOURCE_DIR}/include")
  target_link_libraries(reshard_${name} PUBLIC Threads::Threads)
  foreach(below IN LISTS ARGN)
    target_link_libraries(reshard_${name} PUBLIC reshard_${below})
  endforeach()
  reshard_set_warnings(reshard_${name})
endfunction()
