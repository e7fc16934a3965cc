# reshard_add_layer(NAME [BELOW...]) builds src/NAME/**/*.cpp into the static
# library reshard_NAME, linked against the layers below it. Public headers live
# in include/reshard/NAME/, internal ones beside the sources in src/NAME/.
# Globbing keeps one-concept-per-file cheap to add.
# Folders named mpi/ are left out: they are the MPI transport's own library
# (reshard_mpi, in the top CMakeLists.txt), so that the layers never need MPI.
function(reshard_add_layer name)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/src/${name}/*.cpp")
  list(FILTER sources EXCLUDE REGEX "/mpi/")
  if(NOT sources)
    # A layer with no code yet still forwards the layers below it.
    add_library(reshard_${name} INTERFACE)
    list(TRANSFORM ARGN PREPEND reshard_)
    target_link_libraries(reshard_${name} INTERFACE ${ARGN})
    set_target_properties(reshard_${name} PROPERTIES EXPORT_NAME ${name})
    return()
  endif()
  add_library(reshard_${name} STATIC ${sources})
  target_include_directories(reshard_${name} PUBLIC "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>"
                                                    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  # Internal headers (src/<layer>/*.h, included as "<layer>/name.h") are seen
  # by this layer and the ones above it, never installed.
  target_include_directories(reshard_${name} PRIVATE "${PROJECT_SOURCE_DIR}/src")
  target_link_libraries(reshard_${name} PUBLIC Threads::Threads)
  foreach(below IN LISTS ARGN)
    target_link_libraries(reshard_${name} PUBLIC reshard_${below})
  endforeach()
  # Installed as reshard::NAME.
  set_target_properties(reshard_${name} PROPERTIES EXPORT_NAME ${name})
  reshard_set_warnings(reshard_${name})
endfunction()
