# Resolves TOWERPS_CUDA (AUTO|ON|OFF) into TOWERPS_WITH_CUDA and enables the CUDA language.
# AUTO looks for nvcc on PATH and in /usr/local/cuda/bin. Architectures: sm_90 (Hopper) plus
# sm_80 (Ampere) unless CMAKE_CUDA_ARCHITECTURES is given.
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
    set(TOWERPS_WITH_CUDA ON)
  elseif(_towerps_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "TOWERPS_CUDA=ON but nvcc was found neither on PATH nor in "
                        "/usr/local/cuda/bin. Install the CUDA Toolkit or use -DTOWERPS_CUDA=OFF.")
  else()
    message(STATUS "TowerPS: nvcc not found; building the CPU backend only")
  endif()
endif()
