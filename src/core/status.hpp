// Status helpers and the per-thread "last error" message behind tessera_last_error().
#pragma once
#include <string>

#include "tessera/tessera.hpp"

namespace tessera::detail {

inline Status fail(tessera_status_t code, std::string message) { return Status{code, std::move(message)}; }
inline Status invalid(std::string message) { return fail(TESSERA_STATUS_INVALID_ARGUMENT, std::move(message)); }

// Remembers the status of the last call on this thread (cleared on success) and returns it.
const Status& remember(const Status& s);
const char* last_error();
const char* status_string(tessera_status_t code);

}  // namespace tessera::detail
