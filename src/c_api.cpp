// The C ABI: conversions between the C structs and the C++ API, and thin wrappers, each run by
// detail::guard so that no C++ exception reaches a C caller.
#include "core/status.hpp"
#include "gemm/configs.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

#include <string>

#ifndef TESSERA_VERSION_STRING
#define TESSERA_VERSION_STRING "0.0.0"
#endif

namespace tessera {

tessera_matrix_t to_c(const Matrix& m) noexcept {
  return tessera_matrix_t{m.ptr, tessera_dtype_t(m.dtype), m.rows, m.cols, m.ld, tessera_layout_t(m.layout),
                          m.batch_count, m.batch_stride};
}

static Matrix from_c(const tessera_matrix_t& m) noexcept {
  Matrix r;
  r.ptr = m.ptr;
  r.dtype = DType(m.dtype);
  r.rows = m.rows;
  r.cols = m.cols;
  r.ld = m.ld;
  r.layout = Layout(m.layout);
  r.batch_count = m.batch_count;
  r.batch_stride = m.batch_stride;
  return r;
}

tessera_gemm_args_t to_c(const GemmArgs& a) noexcept {
  return tessera_gemm_args_t{tessera_op_t(a.op_a),
                             tessera_op_t(a.op_b),
                             to_c(a.a),
                             to_c(a.b),
                             to_c(a.c),
                             to_c(a.d),
                             a.alpha,
                             a.beta,
                             a.config.empty() ? nullptr : a.config.c_str(),
                             a.bias,
                             tessera_bias_mode_t(a.bias_mode),
                             a.bias_batch_stride,
                             tessera_activation_t(a.activation),
                             a.max_sms,
                             tessera_precision_t(a.precision),
                             a.scale_a,
                             a.scale_b,
                             tessera_scale_mode_t(a.scale_mode),
                             {a.scale_a_strides[0], a.scale_a_strides[1]},
                             {a.scale_b_strides[0], a.scale_b_strides[1]}};
}

GemmArgs from_c(const tessera_gemm_args_t& a) {
  GemmArgs r;
  r.op_a = Op(a.op_a);
  r.op_b = Op(a.op_b);
  r.a = from_c(a.a);
  r.b = from_c(a.b);
  r.c = from_c(a.c);
  r.d = from_c(a.d);
  r.alpha = a.alpha;
  r.beta = a.beta;
  if (a.config) r.config = a.config;
  r.bias = a.bias;
  r.bias_mode = BiasMode(a.bias_mode);  // out-of-range codes are rejected by validation
  r.bias_batch_stride = a.bias_batch_stride;
  r.activation = Activation(a.activation);
  r.max_sms = a.max_sms;
  r.precision = Precision(a.precision);  // out-of-range codes are rejected by validation
  r.scale_a = a.scale_a;
  r.scale_b = a.scale_b;
  r.scale_mode = ScaleMode(a.scale_mode);  // out-of-range codes are rejected by validation
  for (int i = 0; i < 2; ++i) r.scale_a_strides[i] = a.scale_a_strides[i], r.scale_b_strides[i] = a.scale_b_strides[i];
  return r;
}

// AttentionArgs and tessera_attention_args_t hold the same fields; only the enum/bool types differ.
template <class To, class From>
static void copy_attention_fields(To& r, const From& a) noexcept {
  r.q = a.q;
  r.k = a.k;
  r.v = a.v;
  r.o = a.o;
  r.lse = a.lse;
  r.batch = a.batch;
  r.seqlen_q = a.seqlen_q;
  r.seqlen_k = a.seqlen_k;
  r.heads_q = a.heads_q;
  r.heads_kv = a.heads_kv;
  r.head_dim = a.head_dim;
  for (int i = 0; i < 3; ++i) {
    r.q_stride[i] = a.q_stride[i];
    r.k_stride[i] = a.k_stride[i];
    r.v_stride[i] = a.v_stride[i];
    r.o_stride[i] = a.o_stride[i];
  }
  r.softmax_scale = a.softmax_scale;
  r.max_sms = a.max_sms;
  r.window_left = a.window_left;
  r.window_right = a.window_right;
  r.softcap = a.softcap;
}

// KvCacheArgs and tessera_kvcache_args_t likewise.
template <class To, class From>
static void copy_kvcache_fields(To& r, const From& a) noexcept {
  r.q = a.q;
  r.k_cache = a.k_cache;
  r.v_cache = a.v_cache;
  r.o = a.o;
  r.lse = a.lse;
  r.batch = a.batch;
  r.seqlen_q = a.seqlen_q;
  r.heads_q = a.heads_q;
  r.heads_kv = a.heads_kv;
  r.head_dim = a.head_dim;
  for (int i = 0; i < 3; ++i) {
    r.q_stride[i] = a.q_stride[i];
    r.o_stride[i] = a.o_stride[i];
    r.k_cache_stride[i] = a.k_cache_stride[i];
    r.v_cache_stride[i] = a.v_cache_stride[i];
    r.k_new_stride[i] = a.k_new_stride[i];
    r.v_new_stride[i] = a.v_new_stride[i];
  }
  r.capacity = a.capacity;
  r.cache_seqlens = a.cache_seqlens;
  r.block_table = a.block_table;
  r.block_table_stride = a.block_table_stride;
  r.max_pages = a.max_pages;
  r.num_pages = a.num_pages;
  r.page_size = a.page_size;
  r.k_new = a.k_new;
  r.v_new = a.v_new;
  r.seqlen_new = a.seqlen_new;
  r.softmax_scale = a.softmax_scale;
  r.window_left = a.window_left;
  r.window_right = a.window_right;
  r.softcap = a.softcap;
  r.max_sms = a.max_sms;
}

tessera_kvcache_args_t to_c(const KvCacheArgs& a) noexcept {
  tessera_kvcache_args_t r{};
  copy_kvcache_fields(r, a);
  r.dtype = tessera_dtype_t(a.dtype);
  r.causal = a.causal ? 1 : 0;
  return r;
}

KvCacheArgs from_c(const tessera_kvcache_args_t& a) noexcept {
  KvCacheArgs r;
  copy_kvcache_fields(r, a);
  r.dtype = DType(a.dtype);
  r.causal = a.causal != 0;
  return r;
}

// VarlenArgs and tessera_varlen_args_t likewise.
template <class To, class From>
static void copy_varlen_fields(To& r, const From& a) noexcept {
  r.q = a.q;
  r.k = a.k;
  r.v = a.v;
  r.o = a.o;
  r.lse = a.lse;
  r.cu_seqlens_q = a.cu_seqlens_q;
  r.cu_seqlens_k = a.cu_seqlens_k;
  r.batch = a.batch;
  r.total_q = a.total_q;
  r.total_k = a.total_k;
  r.max_seqlen_q = a.max_seqlen_q;
  r.max_seqlen_k = a.max_seqlen_k;
  r.heads_q = a.heads_q;
  r.heads_kv = a.heads_kv;
  r.head_dim = a.head_dim;
  for (int i = 0; i < 2; ++i) {
    r.q_stride[i] = a.q_stride[i];
    r.k_stride[i] = a.k_stride[i];
    r.v_stride[i] = a.v_stride[i];
    r.o_stride[i] = a.o_stride[i];
  }
  r.softmax_scale = a.softmax_scale;
  r.window_left = a.window_left;
  r.window_right = a.window_right;
  r.softcap = a.softcap;
  r.max_sms = a.max_sms;
}

tessera_varlen_args_t to_c(const VarlenArgs& a) noexcept {
  tessera_varlen_args_t r{};
  copy_varlen_fields(r, a);
  r.dtype = tessera_dtype_t(a.dtype);
  r.causal = a.causal ? 1 : 0;
  return r;
}

VarlenArgs from_c(const tessera_varlen_args_t& a) noexcept {
  VarlenArgs r;
  copy_varlen_fields(r, a);
  r.dtype = DType(a.dtype);
  r.causal = a.causal != 0;
  return r;
}

tessera_attention_args_t to_c(const AttentionArgs& a) noexcept {
  tessera_attention_args_t r{};
  copy_attention_fields(r, a);
  r.dtype = tessera_dtype_t(a.dtype);
  r.causal = a.causal ? 1 : 0;
  return r;
}

AttentionArgs from_c(const tessera_attention_args_t& a) noexcept {
  AttentionArgs r;
  copy_attention_fields(r, a);
  r.dtype = DType(a.dtype);
  r.causal = a.causal != 0;
  return r;
}

}  // namespace tessera

using tessera::detail::guard;
using tessera::detail::invalid;
using tessera::detail::remember;

// The i-th compiled-in GEMM configuration, or null.
static const tessera::gemm_impl::Config* config_at(int i) {
  const auto& c = tessera::gemm_impl::configs();
  return i >= 0 && i < int(c.size()) ? &c[size_t(i)] : nullptr;
}

extern "C" {

tessera_status_t tessera_gemm_workspace_size(const tessera_gemm_args_t* args, size_t* bytes) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::gemm_workspace_size(tessera::from_c(*args), bytes).code;
  });
}

tessera_status_t tessera_gemm(const tessera_gemm_args_t* args, void* workspace, size_t workspace_bytes,
                              void* stream) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::gemm(tessera::from_c(*args), stream, workspace, workspace_bytes).code;
  });
}

tessera_status_t tessera_gemm_select_config(const tessera_gemm_args_t* args, const char** name) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    if (!name) return remember(invalid("name: null pointer")).code;
    std::string n;
    tessera::Status s = tessera::gemm_select_config(tessera::from_c(*args), &n);
    if (s.ok()) {  // static storage
      const tessera::gemm_impl::ConfigChoice c = tessera::gemm_impl::find_config_choice(n);
      *name = tessera::gemm_impl::config_spelling(*c.config, c.flip);
    }
    return s.code;
  });
}

tessera_status_t tessera_attention(const tessera_attention_args_t* args, void* stream) {
  return tessera_attention_with_workspace(args, nullptr, 0, stream);
}

tessera_status_t tessera_attention_with_workspace(const tessera_attention_args_t* args, void* workspace,
                                                  size_t workspace_bytes, void* stream) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::attention(tessera::from_c(*args), stream, workspace, workspace_bytes).code;
  });
}

tessera_status_t tessera_attention_with_kvcache(const tessera_kvcache_args_t* args, void* workspace,
                                                size_t workspace_bytes, void* stream) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::attention_with_kvcache(tessera::from_c(*args), stream, workspace, workspace_bytes).code;
  });
}

tessera_status_t tessera_attention_with_kvcache_workspace_size(const tessera_kvcache_args_t* args, size_t* bytes) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::attention_with_kvcache_workspace_size(tessera::from_c(*args), bytes).code;
  });
}

tessera_status_t tessera_attention_varlen(const tessera_varlen_args_t* args, void* workspace, size_t workspace_bytes,
                                          void* stream) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::attention_varlen(tessera::from_c(*args), stream, workspace, workspace_bytes).code;
  });
}

tessera_status_t tessera_attention_varlen_workspace_size(const tessera_varlen_args_t* args, size_t* bytes) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::attention_varlen_workspace_size(tessera::from_c(*args), bytes).code;
  });
}

tessera_status_t tessera_attention_workspace_size(const tessera_attention_args_t* args, size_t* bytes) {
  return guard([&] {
    if (!args) return remember(invalid("args: null pointer")).code;
    return tessera::attention_workspace_size(tessera::from_c(*args), bytes).code;
  });
}

int tessera_gemm_config_count(void) {
  return guard<int>([] { return int(tessera::gemm_impl::configs().size()); }, 0);
}

const char* tessera_gemm_config_name(int i) {
  return guard<const char*>([i] { return config_at(i) ? config_at(i)->name : nullptr; }, nullptr);
}

const char* tessera_gemm_config_description(int i) {
  return guard<const char*>([i] { return config_at(i) ? config_at(i)->reason : nullptr; }, nullptr);
}

void tessera_reread_environment(void) {
  guard<int>([] {
    tessera::reread_environment();
    return 0;
  }, 0);
}

// These three only read static or thread-local storage: nothing in them can throw.
const char* tessera_status_string(tessera_status_t status) { return tessera::detail::status_string(status); }
const char* tessera_last_error(void) { return tessera::detail::last_error(); }
const char* tessera_version(void) { return TESSERA_VERSION_STRING; }

}  // extern "C"
