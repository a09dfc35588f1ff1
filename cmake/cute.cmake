# Locates the CuTe / CUTLASS 4.2 headers: -DCUTLASS_DIR=<cutlass checkout or include dir>, else
# deps/cutlass (filled by scripts/setup_deps.sh from PyPI nvidia-cutlass==4.2.0.0).
set(CUTLASS_DIR "" CACHE PATH "CUTLASS checkout (or its include/ folder) providing cute/ headers")
set(_cands)
if(CUTLASS_DIR)
  list(APPEND _cands ${CUTLASS_DIR}/include ${CUTLASS_DIR})
endif()
list(APPEND _cands ${CMAKE_SOURCE_DIR}/deps/cutlass/cutlass_library/source/include)
set(TESSERA_CUTLASS_INCLUDE "")
foreach(_c IN LISTS _cands)
  if(EXISTS ${_c}/cute/tensor.hpp AND EXISTS ${_c}/cutlass/cutlass.h)
    set(TESSERA_CUTLASS_INCLUDE ${_c})
    break()
  endif()
endforeach()
if(NOT TESSERA_CUTLASS_INCLUDE)
  message(FATAL_ERROR
    "tessera: CuTe/CUTLASS 4.2 headers not found.\n"
    "  Run scripts/setup_deps.sh (installs PyPI nvidia-cutlass==4.2.0.0 --no-deps into deps/cutlass),\n"
    "  or configure with -DCUTLASS_DIR=<path to a CUTLASS 4.2 checkout>.")
endif()
message(STATUS "tessera: CuTe headers from ${TESSERA_CUTLASS_INCLUDE}")
add_library(tessera_cute INTERFACE)
add_library(tessera::cute ALIAS tessera_cute)
target_include_directories(tessera_cute SYSTEM INTERFACE ${TESSERA_CUTLASS_INCLUDE})
