# Resolves TOWERPS_ONEDNN (AUTO|ON|OFF) into TOWERPS_WITH_ONEDNN and the imported target DNNL::dnnl.
# oneDNN (Debian's libdnnl-dev) runs the CPU backend's convolutions where it measures faster than
# im2col + OpenBLAS (kernels/cpu/onednn_conv.h). AUTO uses it when its CMake package is found and
# builds without it otherwise, with a message; ON makes a missing oneDNN an error. Debian builds
# it with the OpenMP runtime, so TowerPS also needs the OpenMP API (omp_set_num_threads) to keep
# oneDNN on the thread that calls it. Its CMake package also requires OpenCL (Debian builds it
# with an OpenCL GPU runtime; libdnnl-dev only recommends ocl-icd-opencl-dev), so OpenCL is
# looked for first: without it AUTO falls back to im2col instead of failing in dnnl's package.
set(TOWERPS_WITH_ONEDNN OFF)
string(TOUPPER "${TOWERPS_ONEDNN}" _towerps_onednn_mode)
if(NOT _towerps_onednn_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TOWERPS_ONEDNN='${TOWERPS_ONEDNN}' is not one of AUTO, ON, OFF")
endif()

if(NOT _towerps_onednn_mode STREQUAL "OFF")
  find_package(OpenCL QUIET)
  if(OpenCL_FOUND)
    find_package(dnnl 2.6 CONFIG QUIET)
  endif()
  find_package(OpenMP QUIET COMPONENTS CXX)
  if(dnnl_FOUND AND OpenMP_CXX_FOUND)
    set(TOWERPS_WITH_ONEDNN ON)
    message(STATUS "oneDNN ${dnnl_VERSION}: CPU convolutions may use it")
  elseif(_towerps_onednn_mode STREQUAL "ON")
    message(FATAL_ERROR "TOWERPS_ONEDNN=ON but oneDNN 2.6+ (libdnnl-dev), the OpenCL it needs "
                        "(ocl-icd-opencl-dev) or OpenMP was not found. Install libdnnl-dev and "
                        "ocl-icd-opencl-dev (scripts/setup.sh does) or use -DTOWERPS_ONEDNN=OFF.")
  else()
    message(STATUS "oneDNN not found (libdnnl-dev with ocl-icd-opencl-dev): CPU convolutions use "
                   "im2col + OpenBLAS only")
  endif()
endif()
