# TOWERPS_PYTHON: the towerps Python package (python/) for PyTorch workers. AUTO builds it when
# pybind11 (pybind11-dev) and the Python headers (python3-dev) are found, and says so when not;
# ON requires them; OFF skips it. Sanitizer and fuzz builds skip it (an instrumented extension
# cannot load into an uninstrumented Python). Debian's /usr/bin/python3 is preferred, since
# python3-torch is installed for it; -DPython_EXECUTABLE=... chooses another.
set(TOWERPS_PYTHON "AUTO" CACHE STRING "Build the towerps Python package: AUTO, ON or OFF")
set_property(CACHE TOWERPS_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(TOWERPS_WITH_PYTHON OFF)
if(TOWERPS_PYTHON STREQUAL "AUTO" AND (TOWERPS_SANITIZE OR TOWERPS_FUZZ))
  message(STATUS "TowerPS: Python package skipped in a sanitizer or fuzz build")
elseif(NOT TOWERPS_PYTHON STREQUAL "OFF")
  if(NOT Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
  set(PYBIND11_FINDPYTHON ON)
  if(Python_FOUND)
    find_package(pybind11 2.6 CONFIG QUIET)
  endif()
  if(Python_FOUND AND pybind11_FOUND)
    set(TOWERPS_WITH_PYTHON ON)
  elseif(TOWERPS_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "TOWERPS_PYTHON=ON needs pybind11-dev and python3-dev (scripts/setup.sh)")
  else()
    message(STATUS "TowerPS: Python package not built: pybind11-dev or python3-dev is missing "
                   "(scripts/setup.sh installs them)")
  endif()
endif()
