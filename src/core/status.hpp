// Status helpers and the per-thread "last error" message behind tessera_last_error().
#pragma once
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "tessera/tessera.hpp"

namespace tessera::detail {

inline Status fail(tessera_status_t code, std::string message) { return Status{code, std::move(message)}; }
inline Status invalid(std::string message) { return fail(TESSERA_STATUS_INVALID_ARGUMENT, std::move(message)); }

// Remembers the status of the last call on this thread (cleared on success) and returns it.
// Never throws: where no host memory is left to copy the message, tessera_last_error() reports a
// fixed "out of host memory" message instead (these run on the error paths of the C ABI).
const Status& remember(const Status& s) noexcept;
// The same for a failure known only by its code and message (an exception caught at the C ABI);
// returns `code`.
tessera_status_t remember(tessera_status_t code, std::string_view message) noexcept;
const char* last_error() noexcept;

// Runs the body of a C entry (c_api.cpp). No C++ exception may leave one: unwinding into a C
// caller's frames is undefined behaviour, and an exception nothing catches terminates the user's
// process. An exception (std::bad_alloc from a message or a table, std::filesystem_error or
// std::system_error from the standard library, anything else) becomes `on_exception`
// (INTERNAL_ERROR for the status entries, the documented NULL / 0 for the getters), its message
// kept for tessera_last_error().
template <class T = tessera_status_t, class F>
T guard(F&& body, T on_exception = TESSERA_STATUS_INTERNAL_ERROR) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    remember(TESSERA_STATUS_INTERNAL_ERROR, "out of host memory");
  } catch (const std::exception& e) {
    remember(TESSERA_STATUS_INTERNAL_ERROR, e.what());
  } catch (...) {
    remember(TESSERA_STATUS_INTERNAL_ERROR, "unknown C++ exception");
  }
  return on_exception;
}
const char* status_string(tessera_status_t code) noexcept;

}  // namespace tessera::detail
