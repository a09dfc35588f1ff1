#include "attention_harness.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "common/attention_reference.hpp"
#include "gpu_helpers.hpp"
#include "harness.hpp"

namespace tessera_test {
namespace {

using tessera::DType;

// Where one tensor lies: which input buffer, the element offset of its first element, its
// (batch, sequence, head) strides, and its sizes.
struct View {
  int buf = 0;
  int64_t offset = 0;
  int64_t stride[3] = {0, 0, 0};
  int64_t seq = 0, heads = 0;
};

struct Placement {
  int n_in = 0;
  int64_t in_elems[3] = {0, 0, 0};  // elements of each input buffer
  View q, k, v;
  int64_t o_stride[3] = {0, 0, 0};
  int64_t o_elems = 0;  // elements from O's first element to one past its last
};

void set_strides(int64_t (&dst)[3], int64_t b, int64_t s, int64_t h) {
  dst[0] = b;
  dst[1] = s;
  dst[2] = h;
}

// Elements from the start of the view's buffer to one past its last element.
int64_t extent(const View& v, int64_t batch, int64_t d) {
  return v.offset + (batch - 1) * v.stride[0] + (v.seq - 1) * v.stride[1] + (v.heads - 1) * v.stride[2] + d;
}

Placement place(const AttnCase& c) {
  Placement p;
  const int64_t B = c.batch, Sq = c.sq, Sk = c.sk, Hq = c.hq, Hkv = c.hkv, D = c.d;
  p.q.seq = Sq;
  p.q.heads = Hq;
  p.k.seq = p.v.seq = Sk;
  p.k.heads = p.v.heads = Hkv;
  switch (c.layout) {
    case AttnLayout::BSHD:
    case AttnLayout::BHSD: {
      const bool bhsd = c.layout == AttnLayout::BHSD;
      int buf = 0;
      for (View* v : {&p.q, &p.k, &p.v}) {
        v->buf = buf++;
        if (bhsd)
          tessera::bhsd_strides(v->seq, v->heads, D, v->stride);
        else
          tessera::bshd_strides(v->seq, v->heads, D, v->stride);
      }
      p.n_in = 3;
      if (bhsd)
        tessera::bhsd_strides(Sq, Hq, D, p.o_stride);
      else
        tessera::bshd_strides(Sq, Hq, D, p.o_stride);
      break;
    }
    case AttnLayout::Strided: {
      if (Sq == Sk) {  // packed QKV: [B, S, Hq + 2 Hkv, D]
        const int64_t w = (Hq + 2 * Hkv) * D;
        for (View* v : {&p.q, &p.k, &p.v}) set_strides(v->stride, Sq * w, w, D);
        p.q.offset = 0;
        p.k.offset = Hq * D;
        p.v.offset = (Hq + Hkv) * D;
        p.n_in = 1;
      } else {  // Q [B, H, S, D] with padded rows and batches; packed KV [B, Sk, 2, Hkv, D]
        const int64_t row = D + 8;
        set_strides(p.q.stride, Hq * Sq * row + 64, row, Sq * row);
        const int64_t w = 2 * Hkv * D;
        p.k.buf = p.v.buf = 1;
        set_strides(p.k.stride, Sk * w, w, D);
        set_strides(p.v.stride, Sk * w, w, D);
        p.v.offset = Hkv * D;
        p.n_in = 2;
      }
      const int64_t head = D + 16;
      set_strides(p.o_stride, Sq * Hq * head + 8, Hq * head, head);
      break;
    }
  }
  if (c.kv_batch_broadcast) p.k.stride[0] = p.v.stride[0] = 0;
  for (const View* v : {&p.q, &p.k, &p.v})
    p.in_elems[v->buf] = std::max(p.in_elems[v->buf], extent(*v, B, D));
  p.o_elems = (B - 1) * p.o_stride[0] + (Sq - 1) * p.o_stride[1] + (Hq - 1) * p.o_stride[2] + D;
  return p;
}

// The input buffers of a case, poisoned, with every tensor's elements filled with random values.
struct Inputs {
  Placement pl;
  DeviceBuffer buf[3];
  const void* ptr(const View& v, size_t es) const { return buf[v.buf].c() + size_t(v.offset) * es; }
};

cudaError_t make_inputs(const AttnCase& c, uint64_t seed, Inputs& in) {
  in.pl = place(c);
  const size_t es = dtype_bytes(c.dtype);
  for (int i = 0; i < in.pl.n_in; ++i) {
    if (cudaError_t e = in.buf[i].alloc(size_t(in.pl.in_elems[i]) * es); e != cudaSuccess) return e;
    // Bytes that are not elements of Q, K or V stay NaN: a kernel reading them would show it.
    if (cudaError_t e = cudaMemsetAsync(in.buf[i].p, kPoisonByte, in.buf[i].bytes, c.stream); e != cudaSuccess)
      return e;
  }
  int t = 0;
  for (const View* v : {&in.pl.q, &in.pl.k, &in.pl.v}) {
    const bool one_batch = v->stride[0] == 0;  // broadcast K / V: one batch in memory
    const int64_t dims[4] = {one_batch ? 1 : c.batch, v->seq, v->heads, c.d};
    const int64_t strides[4] = {v->stride[0], v->stride[1], v->stride[2], 1};
    if (cudaError_t e = fill_uniform_4d(const_cast<void*>(in.ptr(*v, es)), c.dtype, dims, strides,
                                        mix_seed(seed ^ uint64_t(0xA77 + t++)), c.stream);
        e != cudaSuccess)
      return e;
  }
  return cudaSuccess;
}

tessera::AttentionArgs make_args(const AttnCase& c, const Inputs& in, void* o, float* lse) {
  const size_t es = dtype_bytes(c.dtype);
  tessera::AttentionArgs a;
  a.q = in.ptr(in.pl.q, es);
  a.k = in.ptr(in.pl.k, es);
  a.v = in.ptr(in.pl.v, es);
  a.o = o;
  a.lse = lse;
  a.dtype = c.dtype;
  a.batch = c.batch;
  a.seqlen_q = c.sq;
  a.seqlen_k = c.sk;
  a.heads_q = c.hq;
  a.heads_kv = c.hkv;
  a.head_dim = c.d;
  for (int i = 0; i < 3; ++i) {
    a.q_stride[i] = in.pl.q.stride[i];
    a.k_stride[i] = in.pl.k.stride[i];
    a.v_stride[i] = in.pl.v.stride[i];
    a.o_stride[i] = in.pl.o_stride[i];
  }
  a.softmax_scale = c.scale;
  a.causal = c.causal;
  a.window_left = c.window_left;
  a.window_right = c.window_right;
  a.softcap = c.softcap;
  return a;
}

// "(b, i, h, d)" of a linear index into [B, Sq, Hq, D].
std::string bshd_coord(uint64_t idx, const AttnCase& c) {
  const uint64_t d = idx % uint64_t(c.d);
  idx /= uint64_t(c.d);
  const uint64_t h = idx % uint64_t(c.hq);
  idx /= uint64_t(c.hq);
  const uint64_t i = idx % uint64_t(c.sq), b = idx / uint64_t(c.sq);
  char buf[96];
  std::snprintf(buf, sizeof buf, "(b=%llu, i=%llu, h=%llu, d=%llu)", (unsigned long long)b, (unsigned long long)i,
                (unsigned long long)h, (unsigned long long)d);
  return buf;
}

}  // namespace

const char* layout_name(AttnLayout l) {
  switch (l) {
    case AttnLayout::BSHD: return "bshd";
    case AttnLayout::BHSD: return "bhsd";
    case AttnLayout::Strided: return "strided";
  }
  return "?";
}

std::string describe(const AttnCase& c) {
  std::ostringstream o;
  o << "d=" << c.d << " " << dtype_name(c.dtype) << (c.causal ? " causal" : " non-causal") << " B=" << c.batch
    << " Sq=" << c.sq << " Sk=" << c.sk << " Hq=" << c.hq << " Hkv=" << c.hkv << " layout=" << layout_name(c.layout);
  if (c.scale != 0.0f) o << " scale=" << c.scale;
  if (c.window_left >= 0 || c.window_right >= 0) o << " window=(" << c.window_left << "," << c.window_right << ")";
  if (c.softcap != 0.0f) o << " softcap=" << c.softcap;
  if (!c.with_lse) o << " lse=null";
  if (c.kv_batch_broadcast) o << " kv-batch-stride-0";
  if (c.stream) o << " stream";
  if (c.capture_graph) o << " graph";
  if (c.workspace != AttnWorkspace::Full) o << (c.workspace == AttnWorkspace::None ? " no-workspace" : " half-workspace");
  if (c.use_c_abi) o << " C-ABI";
  if (c.mutate) o << " mutated-args";
  return o.str();
}

AttnOutcome run_attention_case(const AttnCase& c) {
  AttnOutcome out;
  out.seed = fresh_seed();
  std::string& problems = out.problems;
  auto fail_cuda = [&](const char* what, cudaError_t e) {
    problems += std::string(what) + ": " + cudaGetErrorString(e) + "; ";
    cudaGetLastError();
  };
#define TT_CUDA(expr)       \
  do {                      \
    cudaError_t e_ = (expr); \
    if (e_ != cudaSuccess) { \
      fail_cuda(#expr, e_); \
      return out;           \
    }                       \
  } while (0)

  cudaGetLastError();
  const cudaStream_t s = c.stream;
  const size_t es = dtype_bytes(c.dtype);

  // ---- inputs, O and LSE (poisoned, in guard bands) -------------------------------------------
  Inputs in;
  TT_CUDA(make_inputs(c, out.seed, in));
  const Placement& pl = in.pl;
  const int64_t rows = c.batch * c.hq * c.sq;  // LSE entries
  DeviceBuffer obuf, lbuf;
  TT_CUDA(obuf.alloc(2 * kGuardBytes + size_t(pl.o_elems) * es));
  TT_CUDA(lbuf.alloc(2 * kGuardBytes + size_t(rows) * sizeof(float)));
  for (DeviceBuffer* b : {&obuf, &lbuf}) {
    TT_CUDA(cudaMemsetAsync(b->p, kPoisonByte, b->bytes, s));
    TT_CUDA(fill_guard(b->p, kGuardBytes, uint32_t(out.seed), s));
    TT_CUDA(fill_guard(b->c() + b->bytes - kGuardBytes, kGuardBytes, uint32_t(out.seed >> 32), s));
  }
  const std::vector<uint8_t> o_before = to_host(obuf, s, &problems);
  const std::vector<uint8_t> l_before = to_host(lbuf, s, &problems);
  if (!problems.empty()) return out;

  // ---- tessera -------------------------------------------------------------------------------
  tessera::AttentionArgs args = make_args(c, in, obuf.c() + kGuardBytes,
                                          c.with_lse ? reinterpret_cast<float*>(lbuf.c() + kGuardBytes) : nullptr);
  if (c.mutate) c.mutate(args);
  size_t ws_bytes = 0;
  DeviceBuffer wbuf;
  if (c.workspace != AttnWorkspace::None && c.expect == TESSERA_STATUS_SUCCESS) {
    const tessera::Status ws = tessera::attention_workspace_size(args, &ws_bytes);
    if (!ws.ok()) {
      problems += "attention_workspace_size: " + ws.message + "; ";
      return out;
    }
    if (c.workspace == AttnWorkspace::Half) ws_bytes /= 2;
    if (ws_bytes > 0) {
      TT_CUDA(wbuf.alloc(ws_bytes));
      TT_CUDA(cudaMemsetAsync(wbuf.p, kPoisonByte, ws_bytes, s));
    }
  }
  auto call = [&]() -> tessera::Status {
    if (!c.use_c_abi) return tessera::attention(args, s, wbuf.p, ws_bytes);
    const tessera_attention_args_t ca = tessera::to_c(args);
    tessera::Status r;
    r.code = tessera_attention_with_workspace(&ca, wbuf.p, ws_bytes, s);
    r.message = tessera_last_error();
    return r;
  };
  out.status = call_on_stream(s, c.capture_graph, call, &problems);
  if (!problems.empty()) return out;
  TT_CUDA(cudaStreamSynchronize(s));
  TT_CUDA(cudaGetLastError());
  const std::vector<uint8_t> o_after = to_host(obuf, s, &problems);
  const std::vector<uint8_t> l_after = to_host(lbuf, s, &problems);
  if (!problems.empty()) return out;

  if (c.expect != TESSERA_STATUS_SUCCESS) {
    if (out.status.code != c.expect)
      problems += "expected status " + std::string(tessera_status_string(c.expect)) + ", got " +
                  tessera_status_string(out.status.code) + " (" + out.status.message + "); ";
    if (!c.expect_message.empty() && out.status.message.find(c.expect_message) == std::string::npos)
      problems += "message \"" + out.status.message + "\" does not mention \"" + c.expect_message + "\"; ";
    if (o_after != o_before) problems += "a failing call modified O or its guard bands; ";
    if (l_after != l_before) problems += "a failing call modified LSE or its guard bands; ";
    return out;
  }
  if (!out.status.ok()) {
    problems += std::string("tessera returned ") + tessera_status_string(out.status.code) + ": " + out.status.message +
                "; ";
    return out;
  }

  // ---- oracle ---------------------------------------------------------------------------------
  const int64_t total = c.batch * c.sq * c.hq * c.d;
  DeviceBuffer o32, olow, l32;
  TT_CUDA(o32.alloc(size_t(total) * sizeof(float)));
  TT_CUDA(olow.alloc(size_t(total) * sizeof(float)));
  TT_CUDA(l32.alloc(size_t(rows) * sizeof(float)));
  float* lse32 = static_cast<float*>(l32.p);
  TT_CUDA(tessera_ref::attention_reference(args, static_cast<float*>(o32.p), static_cast<float*>(olow.p), lse32, s));
  TT_CUDA(tessera_ref::attention_compare(args, static_cast<float*>(o32.p), static_cast<float*>(olow.p),
                                         c.with_lse ? lse32 : nullptr, &out.err, s));
  out.measured = true;
  out.bound = tessera_ref::attention_bound(out.err, c.dtype);
  std::string why;
  if (!tessera_ref::attention_check(out.err, c.dtype, &why)) {
    problems += why;
    if (out.err.max_err > out.bound) problems += "largest O error at " + bshd_coord(out.err.worst_index, c) + "; ";
    if (out.err.lse_checked && out.err.max_lse_err > tessera_ref::kAttentionLseTol)
      problems += "largest LSE error at row " + std::to_string(out.err.lse_worst_row) + " of [B, Hq, Sq]; ";
  }

  // ---- bytes that are not elements: guard bands and padding -----------------------------------
  std::vector<uint8_t> is_elem(o_after.size(), 0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t h = 0; h < c.hq; ++h) {
        const size_t at = kGuardBytes + size_t(b * pl.o_stride[0] + i * pl.o_stride[1] + h * pl.o_stride[2]) * es;
        std::memset(&is_elem[at], 1, size_t(c.d) * es);
      }
  size_t guard_hits = 0, pad_hits = 0, first_hit = SIZE_MAX;
  for (size_t b = 0; b < o_after.size(); ++b)
    if (!is_elem[b] && o_after[b] != o_before[b]) {
      const bool guard = b < kGuardBytes || b >= o_after.size() - kGuardBytes;
      (guard ? guard_hits : pad_hits)++;
      first_hit = std::min(first_hit, b);
    }
  if (guard_hits)
    problems += std::to_string(guard_hits) + " guard-band bytes of O overwritten (first at byte " +
                std::to_string(long(first_hit) - long(kGuardBytes)) + " relative to O); ";
  if (pad_hits) problems += std::to_string(pad_hits) + " bytes of O's padding (between heads/rows/batches) overwritten; ";
  if (c.with_lse) {
    if (!std::equal(l_after.begin(), l_after.begin() + kGuardBytes, l_before.begin()) ||
        !std::equal(l_after.end() - kGuardBytes, l_after.end(), l_before.end() - kGuardBytes))
      problems += "guard-band bytes of LSE overwritten; ";
  } else if (l_after != l_before) {
    problems += "LSE memory written although lse = null; ";
  }
  return out;
#undef TT_CUDA
}

ReferenceCheck check_gpu_reference(const AttnCase& c) {
  ReferenceCheck r;
  r.seed = fresh_seed();
  std::string& problems = r.problems;
  auto cuda_ok = [&](const char* what, cudaError_t e) {
    if (e == cudaSuccess) return true;
    problems += std::string(what) + ": " + cudaGetErrorString(e) + "; ";
    cudaGetLastError();
    return false;
  };
  const cudaStream_t s = c.stream;
  const size_t es = dtype_bytes(c.dtype);
  Inputs in;
  if (!cuda_ok("inputs", make_inputs(c, r.seed, in))) return r;
  const tessera::AttentionArgs args = make_args(c, in, nullptr, nullptr);
  const int64_t total = c.batch * c.sq * c.hq * c.d, rows = c.batch * c.hq * c.sq;
  DeviceBuffer o32, olow, l32;
  if (!cuda_ok("alloc", o32.alloc(size_t(total) * 4)) || !cuda_ok("alloc", olow.alloc(size_t(total) * 4)) ||
      !cuda_ok("alloc", l32.alloc(size_t(rows) * 4)))
    return r;
  if (!cuda_ok("attention_reference",
               tessera_ref::attention_reference(args, static_cast<float*>(o32.p), static_cast<float*>(olow.p),
                                                static_cast<float*>(l32.p), s)))
    return r;
  if (!cuda_ok("sync", cudaStreamSynchronize(s))) return r;
  auto floats = [&](const DeviceBuffer& b) {
    const std::vector<uint8_t> bytes = to_host(b, s, &problems);
    std::vector<float> f(bytes.size() / 4);
    if (!bytes.empty()) std::memcpy(f.data(), bytes.data(), f.size() * 4);
    return f;
  };
  const std::vector<float> g32 = floats(o32), glow = floats(olow), glse = floats(l32);
  std::vector<uint8_t> host_in[3];
  for (int i = 0; i < in.pl.n_in; ++i) host_in[i] = to_host(in.buf[i], s, &problems);
  if (!problems.empty()) return r;

  // Q, K, V in fp64, contiguous [B, S, H, D], read through the case's strides.
  auto gather = [&](const View& v) {
    std::vector<double> x(size_t(c.batch * v.seq * v.heads * c.d));
    size_t n = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t i = 0; i < v.seq; ++i)
        for (int64_t h = 0; h < v.heads; ++h)
          for (int64_t d = 0; d < c.d; ++d) {
            const int64_t off = v.offset + b * v.stride[0] + i * v.stride[1] + h * v.stride[2] + d;
            x[n++] = host_value(&host_in[v.buf][size_t(off) * es], c.dtype);
          }
    return x;
  };
  const std::vector<double> q = gather(in.pl.q), k = gather(in.pl.k), v = gather(in.pl.v);
  HostAttention h;
  h.batch = c.batch;
  h.seqlen_q = c.sq;
  h.seqlen_k = c.sk;
  h.heads_q = c.hq;
  h.heads_kv = c.hkv;
  h.head_dim = c.d;
  h.causal = c.causal;
  h.window_left = c.window_left;
  h.window_right = c.window_right;
  h.softcap = double(c.softcap);
  // The scale the GPU uses (fp32), so that both compute the same function.
  h.scale = c.scale > 0.0f ? double(c.scale) : double(1.0f / std::sqrt(float(c.d)));
  std::vector<double> o64(h.q_elements()), lse64(h.lse_elements());
  attention_reference_f64(h, q.data(), k.data(), v.data(), o64.data(), lse64.data());

  for (size_t i = 0; i < o64.size(); ++i) {
    r.max_o32_diff = std::max(r.max_o32_diff, std::fabs(double(g32[i]) - o64[i]));
    r.max_olow_diff = std::max(r.max_olow_diff, std::fabs(double(glow[i]) - o64[i]));
    if (!std::isfinite(g32[i]) || !std::isfinite(glow[i])) r.max_o32_diff = std::numeric_limits<double>::infinity();
  }
  int64_t lse_mismatch = 0;
  for (size_t i = 0; i < lse64.size(); ++i) {
    if (std::isinf(lse64[i]) || !std::isfinite(glse[i])) {
      if (double(glse[i]) == lse64[i])
        ++r.empty_rows;
      else
        ++lse_mismatch;
      continue;
    }
    r.max_lse_diff = std::max(r.max_lse_diff, std::fabs(double(glse[i]) - lse64[i]));
  }
  char buf[256];
  if (!(r.max_o32_diff <= 1e-5)) {
    std::snprintf(buf, sizeof buf, "fp32 reference O differs from fp64 by %.3e (> 1e-5); ", r.max_o32_diff);
    problems += buf;
  }
  // Olow: P rounded (relative error <= u) and O rounded (<= u/2 for |O| < 1): |Olow - O| <= 1.5 u + fp32 noise,
  // u = 2^-8 (bf16) or 2^-11 (f16).
  const double low_tol = c.dtype == DType::BF16 ? 6e-3 : 8e-4;
  if (!(r.max_olow_diff <= low_tol)) {
    std::snprintf(buf, sizeof buf, "same-precision reference O differs from fp64 by %.3e (> %.0e); ",
                  r.max_olow_diff, low_tol);
    problems += buf;
  }
  if (!(r.max_lse_diff <= 2e-5)) {
    std::snprintf(buf, sizeof buf, "fp32 reference LSE differs from fp64 by %.3e (> 2e-5); ", r.max_lse_diff);
    problems += buf;
  }
  if (lse_mismatch) problems += std::to_string(lse_mismatch) + " LSE rows infinite/NaN in one reference only; ";
  return r;
}

}  // namespace tessera_test
