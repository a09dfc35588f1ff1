#include "core/status.hpp"

namespace tessera::detail {
namespace {
thread_local std::string t_last_error;
}

const Status& remember(const Status& s) {
  if (s.ok()) t_last_error.clear();
  else t_last_error = s.message;
  return s;
}

const char* last_error() { return t_last_error.c_str(); }

const char* status_string(tessera_status_t code) {
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
