# Resolves TOWERPS_CUDA (AUTO|ON|OFF) into TOWERPS_WITH_CUDA and enables the CUDA language.
# AUTO looks for nvcc on PATH and in /usr/local/cuda/bin. Architectures: sm_90 (Hopper) plus
# sm_80 (Ampere) unless CMAKE_CUDA_ARCHITECTURES is given.
#
# The CUDA backend also needs cuBLAS (part of the toolkit) and cuDNN 9, looked for next to the
# toolkit's libraries (CUDNN_ROOT or the cudnn.h/libcudnn.so of a CUDA install or of the
# nvidia-cudnn wheel may be given with -DCUDNN_ROOT=DIR). It defines the imported target
# towerps::cudnn. With AUTO, a missing cuDNN or cuBLAS falls back to the CPU-only build with a
# message; with ON it is an error.
set(TOWERPS_WITH_CUDA OFF)
string(TOUPPER "${TOWERPS_CUDA}" _towerps_cuda_mode)
if(NOT _towerps_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TOWERPS_CUDA='${TOWERPS_CUDA}' is not one of AUTO, ON, OFF")
endif()

if(NOT _towerps_cuda_mode STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(TOWERPS_NVCC nvcc HINTS ENV CUDA_HOME PATHS /usr/local/cuda/bin NO_CACHE)
    if(TOWERPS_NVCC)
      set(CMAKE_CUDA_COMPILER "${TOWERPS_NVCC}")
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90 80)
    endif()
    # CMake 3.25 knows no CUDA20 dialect for nvcc; device code is C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    get_filename_component(_towerps_cuda_root "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
    find_path(TOWERPS_CUDNN_INCLUDE_DIR cudnn.h
      HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ${CUDAToolkit_INCLUDE_DIRS} "${_towerps_cuda_root}"
      PATH_SUFFIXES include)
    find_library(TOWERPS_CUDNN_LIBRARY cudnn
      HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT "${CUDAToolkit_LIBRARY_DIR}" "${_towerps_cuda_root}"
      PATH_SUFFIXES lib64 lib)
    set(_towerps_cuda_missing "")
    if(NOT TARGET CUDA::cublas)
      list(APPEND _towerps_cuda_missing "cuBLAS (libcublas)")
    endif()
    if(NOT EXISTS "${TOWERPS_CUDNN_INCLUDE_DIR}/cudnn.h" OR NOT EXISTS "${TOWERPS_CUDNN_LIBRARY}")
      list(APPEND _towerps_cuda_missing "cuDNN (cudnn.h and libcudnn.so; set -DCUDNN_ROOT=DIR)")
    endif()
    if(_towerps_cuda_missing STREQUAL "")
      if(NOT TARGET towerps::cudnn)
        add_library(towerps::cudnn UNKNOWN IMPORTED)
        set_target_properties(towerps::cudnn PROPERTIES
          IMPORTED_LOCATION "${TOWERPS_CUDNN_LIBRARY}"
          INTERFACE_INCLUDE_DIRECTORIES "${TOWERPS_CUDNN_INCLUDE_DIR}")
      endif()
      message(STATUS "TowerPS: CUDA backend with cuBLAS and cuDNN (${TOWERPS_CUDNN_LIBRARY})")
      set(TOWERPS_WITH_CUDA ON)
    elseif(_towerps_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "TOWERPS_CUDA=ON but the CUDA backend needs: ${_towerps_cuda_missing}. "
                          "Install them or use -DTOWERPS_CUDA=OFF.")
    else()
      message(STATUS "TowerPS: nvcc found but not ${_towerps_cuda_missing}; "
                     "building the CPU backend only")
    endif()
  elseif(_towerps_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "TOWERPS_CUDA=ON but nvcc was found neither on PATH nor in "
                        "/usr/local/cuda/bin. Install the CUDA Toolkit or use -DTOWERPS_CUDA=OFF.")
  else()
    message(STATUS "TowerPS: nvcc not found; building the CPU backend only")
  endif()
endif()
