# Resolves TOWERPS_LLD (AUTO|ON|OFF): whether TowerPS's programs, test binaries and shared
# libraries link with LLVM's lld (Debian's lld package) instead of the toolchain's default (GNU
# ld). AUTO uses lld when the C++ compiler can (-fuse-ld=lld), ON requires it, OFF keeps the
# default. Sets TOWERPS_WITH_LLD.
#
# Why: a build links about 130 executables and libraries; lld links the 115 test binaries in
# 23 s of wall time where GNU ld takes 47 s (2 cores, docs/PERFORMANCE.md, "The test suite's own
# time"), and scripts/test.sh builds twice. Only C and C++ links take the flag (nvcc links
# device code itself), and no module library: pybind11 compiles the Python extension with GCC's
# link-time optimisation, whose objects hold GCC's intermediate code that only GNU ld's plugin
# reads (lld linked it without PyInit__towerps); the CUDA plugin, the other module, keeps GNU ld
# with it. The flag is this build's: nothing installed passes it on to a user's project.
set(TOWERPS_WITH_LLD OFF)
string(TOUPPER "${TOWERPS_LLD}" _towerps_lld_mode)
if(NOT _towerps_lld_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TOWERPS_LLD='${TOWERPS_LLD}' is not one of AUTO, ON, OFF")
endif()
if(NOT _towerps_lld_mode STREQUAL "OFF")
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" TOWERPS_CXX_LINKS_WITH_LLD)
  if(TOWERPS_CXX_LINKS_WITH_LLD)
    set(TOWERPS_WITH_LLD ON)
    add_link_options(
        "$<$<AND:$<LINK_LANGUAGE:C,CXX>,$<NOT:$<STREQUAL:$<TARGET_PROPERTY:TYPE>,MODULE_LIBRARY>>>:-fuse-ld=lld>")
  elseif(_towerps_lld_mode STREQUAL "ON")
    message(FATAL_ERROR "TOWERPS_LLD=ON but ${CMAKE_CXX_COMPILER} cannot link with -fuse-ld=lld. "
                        "Install lld (scripts/setup.sh does) or use -DTOWERPS_LLD=AUTO or OFF.")
  endif()
endif()
