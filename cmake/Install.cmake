# `cmake --install` puts the headers, the static libraries and a CMake package
# in the prefix, so that another project can
#   find_package(reshard 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE reshard::reshard)   # and reshard::mpi for MPI
include(CMakePackageConfigHelpers)

set(RESHARD_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/reshard")

install(TARGETS reshard_layout reshard_plan reshard_execute reshard_storage reshard_formats reshard_pipelines reshard_library
        EXPORT reshard-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT reshard-targets NAMESPACE reshard:: DESTINATION ${RESHARD_CMAKE_DIR})
# include/ holds the public API only (docs/api.md lists it); internal headers
# live beside their sources under src/ and are not installed.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN "mpi" EXCLUDE PATTERN "mpi.h" EXCLUDE)
# The documents the headers refer to.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/" DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

if(RESHARD_WITH_MPI)
  install(TARGETS reshard_mpi EXPORT reshard-mpi-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT reshard-mpi-targets NAMESPACE reshard:: DESTINATION ${RESHARD_CMAKE_DIR})
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/reshard/execute/mpi"
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/reshard/execute)
  install(FILES "${PROJECT_SOURCE_DIR}/include/reshard/mpi.h" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/reshard)
endif()

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/reshardConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/reshardConfig.cmake" INSTALL_DESTINATION ${RESHARD_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/reshardConfigVersion.cmake"
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/reshardConfig.cmake" "${PROJECT_BINARY_DIR}/reshardConfigVersion.cmake"
        DESTINATION ${RESHARD_CMAKE_DIR})
