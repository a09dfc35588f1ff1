# Injected by pyproject.toml as CMAKE_PROJECT_INCLUDE (runs right after project(), before
# cmake/cute.cmake looks for the CuTe headers). When neither -DCUTLASS_DIR nor deps/cutlass
# (scripts/setup_deps.sh) provides them, installs PyPI nvidia-cutlass==4.2.0.0 with --no-deps (its
# dependencies -- cuda-python, scipy, ... -- are only for its Python generator, not the headers)
# into the build tree and points CUTLASS_DIR there.
include_guard(GLOBAL)
if(PROJECT_NAME STREQUAL "tessera" AND NOT CUTLASS_DIR AND
   NOT EXISTS "${CMAKE_SOURCE_DIR}/deps/cutlass/cutlass_library/source/include/cute/tensor.hpp")
  set(_cutlass_dest "${CMAKE_BINARY_DIR}/_deps/nvidia-cutlass")
  set(_cutlass_src "${_cutlass_dest}/cutlass_library/source")
  if(NOT EXISTS "${_cutlass_src}/include/cute/tensor.hpp")
    if(NOT Python_EXECUTABLE)
      find_package(Python 3.9 REQUIRED COMPONENTS Interpreter)
    endif()
    message(STATUS "tessera: installing the CuTe/CUTLASS headers (pip install --no-deps nvidia-cutlass==4.2.0.0) into ${_cutlass_dest}")
    # pip of the build's Python (pyproject lists pip as a build requirement, so pip's isolated build
    # environment has one), else any pip on PATH (a pure-Python wheel: the interpreter does not matter).
    set(_pip_args install --quiet --disable-pip-version-check --no-deps --no-compile --target "${_cutlass_dest}"
                  nvidia-cutlass==4.2.0.0)
    execute_process(COMMAND "${Python_EXECUTABLE}" -m pip ${_pip_args} RESULT_VARIABLE _cutlass_rc)
    set(_tried "${Python_EXECUTABLE} -m pip")
    if(NOT _cutlass_rc EQUAL 0)
      find_program(TESSERA_PIP NAMES pip3 pip)
      if(TESSERA_PIP)
        execute_process(COMMAND "${TESSERA_PIP}" ${_pip_args} RESULT_VARIABLE _cutlass_rc)
        string(APPEND _tried ", ${TESSERA_PIP}")
      endif()
    endif()
    if(NOT _cutlass_rc EQUAL 0 OR NOT EXISTS "${_cutlass_src}/include/cute/tensor.hpp")
      message(FATAL_ERROR
        "tessera: could not install nvidia-cutlass==4.2.0.0 with pip (tried: ${_tried}).\n"
        "  Run scripts/setup_deps.sh first, or pass -DCUTLASS_DIR=<CUTLASS 4.2 checkout>\n"
        "  (pip: --config-settings=cmake.define.CUTLASS_DIR=<path>).")
    endif()
  endif()
  set(CUTLASS_DIR "${_cutlass_src}" CACHE PATH "CUTLASS checkout (or its include/ folder) providing cute/ headers" FORCE)
endif()
