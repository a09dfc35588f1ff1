// What the binding files share: the status check that raises a Python exception, and the device
// pointers that arrive from Python as plain integers.
#pragma once
#include <cstdint>

#include "tessera/tessera.hpp"

namespace tessera_python {

void check(const tessera::Status& s);  // module.cpp: raises the status' Python exception

template <class T>
T* as_ptr(uintptr_t p) {
  return reinterpret_cast<T*>(p);
}

}  // namespace tessera_python
