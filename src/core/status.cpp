#include "core/status.hpp"

namespace tessera::detail {
namespace {
thread_local std::string t_last_error;
// Set instead of t_last_error when copying a message failed (no host memory): a static string,
// so that the failure path itself cannot throw.
thread_local const char* t_static_error = nullptr;

void set_last_error(std::string_view message) noexcept {
  try {
    t_last_error.assign(message.data(), message.size());
    t_static_error = nullptr;
  } catch (...) {  // std::bad_alloc or std::length_error from the copy
    t_static_error = "out of host memory (the error message could not be stored)";
  }
}
}  // namespace

const Status& remember(const Status& s) noexcept {
  if (s.ok()) {
    t_last_error.clear();
    t_static_error = nullptr;
  } else {
    set_last_error(s.message);
  }
  return s;
}

tessera_status_t remember(tessera_status_t code, std::string_view message) noexcept {
  set_last_error(message);
  return code;
}

const char* last_error() noexcept { return t_static_error ? t_static_error : t_last_error.c_str(); }

const char* status_string(tessera_status_t code) noexcept {
  switch (code) {
    case TESSERA_STATUS_SUCCESS: return "success";
    case TESSERA_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case TESSERA_STATUS_NOT_SUPPORTED: return "not supported";
    case TESSERA_STATUS_CUDA_ERROR: return "CUDA error";
    case TESSERA_STATUS_INTERNAL_ERROR: return "internal error";
  }
  return "unknown status";
}

}  // namespace tessera::detail
