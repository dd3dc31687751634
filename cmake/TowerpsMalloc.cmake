# Resolves TOWERPS_TCMALLOC (AUTO|ON|OFF) into TOWERPS_WITH_TCMALLOC and defines
# towerps_link_allocator(target), which links gperftools' tcmalloc_minimal (Debian's
# libgoogle-perftools-dev) into one of TowerPS's programs: towerps-server and towerps-worker.
#
# Why: a training step allocates and frees many small buffers in every process (messages, ids,
# row blocks, tensors' shapes), and glibc's malloc merges its fast bins back (malloc_consolidate)
# whenever a larger block follows them. tcmalloc's per-thread caches do neither. Measured on the
# native DLRM job: 6-9% fewer CPU-seconds a step over all processes (docs/PERFORMANCE.md, "CPU a
# step").
#
# Only programs link it: a library cannot choose the allocator of the process that loads it (the
# Python module keeps Python's, and a user's program built on libtowerps keeps its own).
# towerps-bench keeps glibc's: its memory figures hand the heap back with malloc_trim first. Never
# with sanitizers, which bring their own allocator; AUTO then resolves OFF.
set(TOWERPS_WITH_TCMALLOC OFF)
string(TOUPPER "${TOWERPS_TCMALLOC}" _towerps_tcmalloc_mode)
if(NOT _towerps_tcmalloc_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TOWERPS_TCMALLOC='${TOWERPS_TCMALLOC}' is not one of AUTO, ON, OFF")
endif()
if(_towerps_tcmalloc_mode STREQUAL "ON" AND (TOWERPS_SANITIZE OR TOWERPS_FUZZ))
  message(FATAL_ERROR "TOWERPS_TCMALLOC=ON cannot be combined with sanitizers or fuzzing, which "
                      "replace the allocator themselves; use -DTOWERPS_TCMALLOC=AUTO or OFF")
endif()

if(NOT _towerps_tcmalloc_mode STREQUAL "OFF" AND NOT TOWERPS_SANITIZE AND NOT TOWERPS_FUZZ)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(tcmalloc QUIET IMPORTED_TARGET libtcmalloc_minimal)
  if(tcmalloc_FOUND)
    set(TOWERPS_WITH_TCMALLOC ON)
    message(STATUS "tcmalloc_minimal ${tcmalloc_VERSION}: TowerPS's programs allocate with it")
    # What a --worker-cmd worker preloads (launch/worker_cmd.h): the library by its run-time
    # name (libtcmalloc_minimal.so.4, which libtcmalloc-minimal4 installs without the -dev link).
    list(FILTER tcmalloc_LINK_LIBRARIES INCLUDE REGEX "tcmalloc_minimal")
    list(GET tcmalloc_LINK_LIBRARIES 0 _towerps_tcmalloc_lib)
    get_filename_component(_towerps_tcmalloc_dir "${_towerps_tcmalloc_lib}" DIRECTORY)
    file(GLOB _towerps_tcmalloc_names "${_towerps_tcmalloc_dir}/libtcmalloc_minimal.so.[0-9]*")
    list(SORT _towerps_tcmalloc_names)
    list(APPEND _towerps_tcmalloc_names "${_towerps_tcmalloc_lib}")
    list(GET _towerps_tcmalloc_names 0 TOWERPS_TCMALLOC_PRELOAD)
  elseif(_towerps_tcmalloc_mode STREQUAL "ON")
    message(FATAL_ERROR "TOWERPS_TCMALLOC=ON but tcmalloc_minimal (libgoogle-perftools-dev) was "
                        "not found. Install it (scripts/setup.sh does) or use "
                        "-DTOWERPS_TCMALLOC=OFF.")
  else()
    message(STATUS "tcmalloc_minimal not found (libgoogle-perftools-dev): TowerPS's programs use "
                   "glibc's malloc")
  endif()
endif()

function(towerps_link_allocator target)
  if(TOWERPS_WITH_TCMALLOC)
    target_link_libraries(${target} PRIVATE PkgConfig::tcmalloc)
  endif()
endfunction()

# The library towerps-launch preloads into --worker-cmd workers (--worker-allocator), or none.
function(towerps_define_tcmalloc_preload target)
  if(TOWERPS_WITH_TCMALLOC)
    target_compile_definitions(${target} PRIVATE
                               TOWERPS_TCMALLOC_PRELOAD="${TOWERPS_TCMALLOC_PRELOAD}")
  endif()
endfunction()
