# `cmake --install BUILD --prefix P`: the binaries (P/bin), the static libraries (P/lib), the
# public headers <towerps/...> (P/include/towerps) and the CMake package
# (P/lib/cmake/TowerPS: TowerPSConfig.cmake, its version file and the imported targets), so that
# an unrelated project does
#
#   find_package(TowerPS 0.2 REQUIRED)
#   target_link_libraries(my-worker PRIVATE TowerPS::towerps)
#
# TowerPS::towerps is the worker library (WorkerMain, Registry, ModelBuilder) and brings the
# parameter-server client, the kernels and the common layer with it. Internal headers are not
# installed: a user's code sees only <towerps/...>.
include(CMakePackageConfigHelpers)

set(TOWERPS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/TowerPS")

configure_file(cmake/version.h.in "${PROJECT_BINARY_DIR}/include/towerps/version.h" @ONLY)
target_include_directories(towerps_common PUBLIC
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)

set_target_properties(towerps_common PROPERTIES EXPORT_NAME common)
set_target_properties(towerps_kernels PROPERTIES EXPORT_NAME kernels)
set_target_properties(towerps_job PROPERTIES EXPORT_NAME job)
set_target_properties(towerps_ps PROPERTIES EXPORT_NAME ps)
set_target_properties(towerps_worker PROPERTIES EXPORT_NAME towerps)

install(TARGETS towerps-server towerps-worker towerps-launch towerps-bench
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The CUDA backend's plugin (kernels/gpu_plugin.h), loaded from P/lib by the programs.
if(TOWERPS_WITH_CUDA)
  install(TARGETS towerps_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(TARGETS towerps_common towerps_kernels towerps_job towerps_ps towerps_worker
  EXPORT TowerPSTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY common/include/towerps worker/include/towerps
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES "${PROJECT_BINARY_DIR}/include/towerps/version.h"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/towerps)
install(EXPORT TowerPSTargets NAMESPACE TowerPS:: DESTINATION ${TOWERPS_INSTALL_CMAKEDIR})

# What the config needs to find the same dependencies the libraries were built with.
set(TOWERPS_CONFIG_WITH_CUDA ${TOWERPS_WITH_CUDA})
configure_package_config_file(cmake/TowerPSConfig.cmake.in
  "${PROJECT_BINARY_DIR}/TowerPSConfig.cmake"
  INSTALL_DESTINATION ${TOWERPS_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/TowerPSConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/TowerPSConfig.cmake"
              "${PROJECT_BINARY_DIR}/TowerPSConfigVersion.cmake"
  DESTINATION ${TOWERPS_INSTALL_CMAKEDIR})
