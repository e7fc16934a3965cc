# Every dependency comes from Debian packages installed by scripts/install-deps.sh.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# HTTP for the object stores (Debian's libcurl4-openssl-dev).
find_package(CURL REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# S3 answers in XML (Debian's libtinyxml2-dev).
pkg_check_modules(TINYXML2 REQUIRED IMPORTED_TARGET tinyxml2)
if(RESHARD_WITH_MPI STREQUAL "AUTO")
  # The Python build: the MPI transport when MPI is there, none otherwise.
  find_package(MPI COMPONENTS CXX)
  set(RESHARD_WITH_MPI ${MPI_CXX_FOUND})
elseif(RESHARD_WITH_MPI)
  find_package(MPI REQUIRED COMPONENTS CXX)
endif()
# Gloo (Debian's libgloo-dev) for the TCP transport of jobs not started by
# mpirun (issue 39). Debian's 0.0~git20220518 ships the tcp and ibverbs
# transports and file/hash/prefix/redis stores but no TCPStore, so reshard
# serves its own rendezvous store. Optional until the transport lands.
find_package(Gloo CONFIG QUIET)
set(RESHARD_HAVE_GLOO ${Gloo_FOUND})
if(RESHARD_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RESHARD_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
