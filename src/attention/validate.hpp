// Argument rules of tessera::attention (implemented in api.cpp); host-only, for the CPU tests.
#pragma once
#include "tessera/tessera.hpp"

namespace tessera::attn {
Status validate(const AttentionArgs& args);
}
