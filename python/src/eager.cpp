// The eager fast path of tessera.matmul / tessera.attention: the torch tensors themselves in, one
// launch out, in a single crossing. The facts the library needs (address, sizes, strides, dtype,
// device) are read through the Python C API, so the module stays free of libtorch and its ABI.
// Anything unusual (strides with no row/column-major form, broadcasting C, a bias to convert,
// mixed devices, empty outputs, a device other than the current one, int8 / fp8 scales other than
// one element each or (M,) / (N,) vectors, a precision the operands do not take) answers kGeneral and
// the Python layer takes its general path, which handles it and raises the errors: this path never
// changes what a call computes or how it fails, only what it costs.
#include <Python.h>
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "binding.hpp"
#include "tessera/tessera.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessera_python {

namespace {

constexpr int64_t kGeneral = -1;  // "take the general path"
constexpr int64_t kDecodeMaxSeqlenQ = 16;  // attention_workspace_size() is 0 for longer query sequences

// Whether `stream` is capturing a CUDA graph (or cannot tell): a cached workspace may not be used
// there, since a replay may run beside later eager calls.
bool capturing(uintptr_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &capture) != cudaSuccess ||
         capture != cudaStreamCaptureStatusNone;
}

// torch.float16 / bfloat16 / float32 / int8 / int32 / float8_e4m3fn / float8_e5m2, registered by the
// Python layer (set_torch_dtypes). The 16-bit dtypes come first: view_of stops at the first match.
constexpr int kDtypes = 7;
PyObject* g_dtypes[kDtypes] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
const int kDtypeCodes[kDtypes] = {TESSERA_DTYPE_F16, TESSERA_DTYPE_BF16, TESSERA_DTYPE_F32, TESSERA_DTYPE_S8,
                                  TESSERA_DTYPE_S32, TESSERA_DTYPE_E4M3, TESSERA_DTYPE_E5M2};

bool is_fp8(int dtype) { return dtype == TESSERA_DTYPE_E4M3 || dtype == TESSERA_DTYPE_E5M2; }

struct Names {  // interned attribute names
  PyObject *data_ptr, *shape, *stride, *dtype, *get_device;
};
const Names& names() {
  static const Names n{PyUnicode_InternFromString("data_ptr"), PyUnicode_InternFromString("shape"),
                       PyUnicode_InternFromString("stride"), PyUnicode_InternFromString("dtype"),
                       PyUnicode_InternFromString("get_device")};
  return n;
}

// What the library needs of one tensor.
struct View {
  uintptr_t ptr = 0;
  int dtype = -1;  // a tessera dtype code, -1 for any other dtype
  int device = -1;
  int dim = 0;
  int64_t size[4] = {}, stride[4] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < dim; ++i) n *= size[i];
    return n;
  }
};

bool int_tuple(PyObject* t, int dim, int64_t* out) {
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != dim) return false;
  for (int i = 0; i < dim; ++i) {
    out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    if (out[i] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

// Reads `t` (a torch.Tensor of at most 4 modes); false (Python error cleared) for anything else.
bool view_of(nb::handle h, View* v) {
  PyObject* t = h.ptr();
  const Names& n = names();
  bool ok = false;
  PyObject *shape = PyObject_GetAttr(t, n.shape), *stride = nullptr, *ptr = nullptr, *dtype = nullptr, *dev = nullptr;
  if (shape && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) <= 4) {
    v->dim = int(PyTuple_GET_SIZE(shape));
    stride = PyObject_CallMethodNoArgs(t, n.stride);
    ptr = PyObject_CallMethodNoArgs(t, n.data_ptr);
    dtype = PyObject_GetAttr(t, n.dtype);
    dev = PyObject_CallMethodNoArgs(t, n.get_device);
    if (stride && ptr && dtype && dev && int_tuple(shape, v->dim, v->size) && int_tuple(stride, v->dim, v->stride)) {
      v->ptr = uintptr_t(PyLong_AsUnsignedLongLong(ptr));
      v->device = int(PyLong_AsLong(dev));
      for (int i = 0; i < kDtypes; ++i)
        if (dtype == g_dtypes[i]) {
          v->dtype = kDtypeCodes[i];
          break;
        }
      ok = !PyErr_Occurred();
    }
  }
  Py_XDECREF(shape);
  Py_XDECREF(stride);
  Py_XDECREF(ptr);
  Py_XDECREF(dtype);
  Py_XDECREF(dev);
  if (!ok) PyErr_Clear();
  return ok;
}

// The last two modes of a 2-D/3-D tensor as a tessera matrix (a 3-D tensor's first mode is the
// batch; stride 0 broadcasts): false where they are neither row- nor column-major (the rule of the
// Python layer's _matrix, which the general path applies).
bool matrix_of(const View& v, tessera::Matrix* m) {
  if (v.dim != 2 && v.dim != 3) return false;
  const int64_t rows = v.size[v.dim - 2], cols = v.size[v.dim - 1];
  const int64_t sr = v.stride[v.dim - 2], sc = v.stride[v.dim - 1];
  m->ptr = reinterpret_cast<const void*>(v.ptr);
  m->dtype = tessera::DType(v.dtype);
  m->rows = rows;
  m->cols = cols;
  const bool batched = v.dim == 3 && v.size[0] > 1;
  m->batch_count = batched ? v.size[0] : 1;
  m->batch_stride = batched ? v.stride[0] : 0;
  const int64_t one_col = cols > 1 ? cols : 1, one_row = rows > 1 ? rows : 1;
  if ((sc == 1 || cols <= 1) && (rows <= 1 || sr >= one_col)) {
    m->layout = tessera::Layout::RowMajor;
    m->ld = rows > 1 ? sr : one_col;
  } else if ((sr == 1 || rows <= 1) && (cols <= 1 || sc >= one_row)) {
    m->layout = tessera::Layout::ColMajor;
    m->ld = cols > 1 ? sc : one_row;
  } else {
    return false;
  }
  return true;
}

// A scale vector of `len` fp32 values as the Python layer's _scales accepts it without a copy:
// (len,), or (len, 1) for `column` (scale_a: a row of op(A) each) / (1, len) otherwise (scale_b: a
// column of op(B) each), with unit stride along len.
bool scale_vector(const View& v, int64_t len, bool column) {
  int64_t stride = 0;
  if (v.dim == 1 && v.size[0] == len) stride = v.stride[0];
  else if (v.dim == 2 && column && v.size[0] == len && v.size[1] == 1) stride = v.stride[0];
  else if (v.dim == 2 && !column && v.size[0] == 1 && v.size[1] == len) stride = v.stride[1];
  else return false;
  return len <= 1 || stride == 1;
}

// A rows x cols block-scale matrix with a row- or column-major form (matrix_of's rule, the library's too;
// its strides go to the library as they are).
bool scale_matrix(const View& v, int64_t rows, int64_t cols) {
  tessera::Matrix m;
  return v.dim == 2 && v.size[0] == rows && v.size[1] == cols && matrix_of(v, &m);
}

// The dequantisation scales of s8 / fp8 operands into `g`: fp32 on `dev`, one element each (per tensor),
// scale_a (M,) / (M, 1) and scale_b (N,) / (1, N) (row-wise), or for fp8 scale_a (M, ceil(K/128)) and
// scale_b (ceil(K/128), ceil(N/128)) (block); false for anything else (one of them missing, mixed modes,
// strided or misshapen scales), which the general path handles or rejects.
bool scales_of(nb::handle sa, nb::handle sb, int dev, bool fp8, tessera::GemmArgs* g) {
  View va, vb;
  if (sa.is_none() || sb.is_none() || !view_of(sa, &va) || !view_of(sb, &vb)) return false;
  if (va.dtype != TESSERA_DTYPE_F32 || vb.dtype != TESSERA_DTYPE_F32 || va.device != dev || vb.device != dev)
    return false;
  constexpr int64_t kBlock = TESSERA_SCALE_BLOCK_K;
  const int64_t kb = (g->a.cols + kBlock - 1) / kBlock, nb = (g->d.cols + kBlock - 1) / kBlock;
  if (va.numel() == 1 && vb.numel() == 1) {
    g->scale_mode = tessera::ScaleMode::Tensor;
  } else if (scale_vector(va, g->d.rows, true) && scale_vector(vb, g->d.cols, false)) {
    g->scale_mode = tessera::ScaleMode::RowWise;
  } else if (fp8 && scale_matrix(va, g->d.rows, kb) && scale_matrix(vb, kb, nb)) {
    g->scale_mode = tessera::ScaleMode::Block;
    for (int i = 0; i < 2; ++i) g->scale_a_strides[i] = va.stride[i], g->scale_b_strides[i] = vb.stride[i];
  } else {
    return false;
  }
  g->scale_a = reinterpret_cast<const float*>(va.ptr);
  g->scale_b = reinterpret_cast<const float*>(vb.ptr);
  return true;
}

int current_device() {
  int d = -1;
  return cudaGetDevice(&d) == cudaSuccess ? d : -2;
}

// Launches `g`, with the workspace it needs: 0 when launched; else the bytes to allocate (nothing
// launched) when the given workspace is too small, or is the caller's cached one while the stream
// is being captured (a graph must own its workspace: a replay may run beside later eager calls).
int64_t launch_gemm(const tessera::GemmArgs& g, uintptr_t ws, size_t ws_bytes, bool ws_cached, uintptr_t stream) {
  size_t need = 0;
  check(tessera::gemm_workspace_size(g, &need));
  if (need > ws_bytes) return int64_t(need);
  if (need > 0 && ws_cached && capturing(stream)) return int64_t(need);
  tessera::Status s;
  {
    nb::gil_scoped_release release;
    s = tessera::gemm(g, reinterpret_cast<void*>(stream), reinterpret_cast<void*>(ws), ws_bytes);
  }
  check(s);
  return 0;
}

int64_t matmul_tensors(nb::handle a, nb::handle b, nb::handle c, nb::handle d, float alpha, float beta,
                       nb::handle bias, int activation, uintptr_t ws, size_t ws_bytes, bool ws_cached,
                       uintptr_t stream, int max_sms, int precision, nb::handle scale_a, nb::handle scale_b) {
  View va, vb, vd;
  if (!view_of(a, &va) || !view_of(b, &vb) || !view_of(d, &vd)) return kGeneral;
  tessera::GemmArgs g;
  if (va.dtype < 0 || vb.dtype < 0 || vd.dtype < 0 || !matrix_of(va, &g.a) || !matrix_of(vb, &g.b) ||
      !matrix_of(vd, &g.d) || vd.numel() == 0)
    return kGeneral;
  const int dev = va.device;
  if (dev < 0 || vb.device != dev || vd.device != dev || dev != current_device()) return kGeneral;
  // The output's shape is the broadcast one (Python's _matmul_shape): D's batch is the larger of A's
  // and B's, which must be equal or 1.
  const int64_t la = va.dim == 3 ? va.size[0] : 1, lb = vb.dim == 3 ? vb.size[0] : 1;
  const int64_t l = la == 1 ? lb : la;
  if ((la != lb && la != 1 && lb != 1) || (va.dim == 3 || vb.dim == 3) != (vd.dim == 3) ||
      (vd.dim == 3 && vd.size[0] != l) || g.d.rows != g.a.rows || g.d.cols != g.b.cols)
    return kGeneral;
  if (beta != 0.0f && !c.is_none()) {  // like BLAS, C is not read when beta == 0
    View vc;
    if (!view_of(c, &vc) || vc.device != dev || vc.dim != vd.dim || !matrix_of(vc, &g.c)) return kGeneral;
    for (int i = 0; i < vd.dim; ++i)
      if (vc.size[i] != vd.size[i]) return kGeneral;  // broadcasting C: the general path expands it
  }
  if (!bias.is_none()) {  // a contiguous vector of N in D's dtype (the general path converts others)
    View vbias;
    if (!view_of(bias, &vbias) || vbias.device != dev || vbias.dim != 1 || vbias.dtype != vd.dtype ||
        vbias.size[0] != g.d.cols || (vbias.size[0] > 1 && vbias.stride[0] != 1))
      return kGeneral;
    g.bias = reinterpret_cast<const void*>(vbias.ptr);
    g.bias_mode = tessera::BiasMode::PerColumn;
  }
  g.alpha = alpha;
  g.beta = beta;
  g.activation = tessera::Activation(activation);
  g.max_sms = max_sms;
  g.precision = tessera::Precision(precision);
  // The int8 and fp8 GEMMs, as the general path (_torch.py: _output_dtype) takes them: int8 a and b with an
  // int32 d without scales or an f16 / bf16 / f32 d with them; fp8 a and b of one type with an f16 / bf16 /
  // f32 d, scales optional, precision default or fast_accum (fast_accum for nothing else). The rest goes
  // there, which names the error.
  const bool scaled = !scale_a.is_none() || !scale_b.is_none();
  if (is_fp8(va.dtype) || is_fp8(vb.dtype)) {
    if (vb.dtype != va.dtype || (vd.dtype != TESSERA_DTYPE_F16 && vd.dtype != TESSERA_DTYPE_BF16 &&
                                 vd.dtype != TESSERA_DTYPE_F32))
      return kGeneral;
    if (precision != TESSERA_PRECISION_DEFAULT && precision != TESSERA_PRECISION_FP8_FAST_ACCUM) return kGeneral;
    if (scaled && !scales_of(scale_a, scale_b, dev, true, &g)) return kGeneral;
    // Block scales write a row-major D: the general path computes a column-major out= through a copy.
    if (g.scale_mode == tessera::ScaleMode::Block && g.d.layout != tessera::Layout::RowMajor) return kGeneral;
  } else if (precision == TESSERA_PRECISION_FP8_FAST_ACCUM) {
    return kGeneral;
  } else if (scaled || va.dtype == TESSERA_DTYPE_S8 || vb.dtype == TESSERA_DTYPE_S8) {
    if (va.dtype != TESSERA_DTYPE_S8 || vb.dtype != TESSERA_DTYPE_S8) return kGeneral;
    if (scaled ? vd.dtype == TESSERA_DTYPE_S32 || !scales_of(scale_a, scale_b, dev, false, &g) : vd.dtype != TESSERA_DTYPE_S32)
      return kGeneral;
  }
  return launch_gemm(g, ws, ws_bytes, ws_cached, stream);
}

// (batch, sequence, head) strides of a 4-D tensor in the layout; a mode of extent 1 gets stride 0.
void attn_strides(const View& v, bool bshd, int64_t (&st)[3]) {
  const int idx[3] = {0, bshd ? 1 : 2, bshd ? 2 : 1};
  for (int i = 0; i < 3; ++i) st[i] = v.size[idx[i]] == 1 ? 0 : v.stride[idx[i]];
}

int64_t attention_tensors(nb::handle q, nb::handle k, nb::handle v, nb::handle o, nb::handle lse, bool causal,
                          float scale, bool bshd, uintptr_t stream, int max_sms, uintptr_t ws, size_t ws_bytes,
                          bool ws_cached, int64_t window_left, int64_t window_right, float softcap) {
  View vq, vk, vv, vo;
  if (!view_of(q, &vq) || !view_of(k, &vk) || !view_of(v, &vv) || !view_of(o, &vo)) return kGeneral;
  for (const View* t : {&vq, &vk, &vv, &vo})
    if (t->dim != 4 || t->stride[3] != 1 || t->device != vq.device) return kGeneral;
  if (vq.dtype != TESSERA_DTYPE_F16 && vq.dtype != TESSERA_DTYPE_BF16) return kGeneral;
  if (vk.dtype != vq.dtype || vv.dtype != vq.dtype || vo.dtype != vq.dtype) return kGeneral;
  for (int i = 0; i < 4; ++i)
    if (vv.size[i] != vk.size[i] || vo.size[i] != vq.size[i]) return kGeneral;
  if (vq.device < 0 || vq.device != current_device() || vq.numel() == 0) return kGeneral;
  tessera::AttentionArgs a;
  a.q = reinterpret_cast<const void*>(vq.ptr);
  a.k = reinterpret_cast<const void*>(vk.ptr);
  a.v = reinterpret_cast<const void*>(vv.ptr);
  a.o = reinterpret_cast<void*>(vo.ptr);
  a.dtype = tessera::DType(vq.dtype);
  a.batch = vq.size[0];
  a.seqlen_q = bshd ? vq.size[1] : vq.size[2];
  a.heads_q = bshd ? vq.size[2] : vq.size[1];
  a.seqlen_k = bshd ? vk.size[1] : vk.size[2];
  a.heads_kv = bshd ? vk.size[2] : vk.size[1];
  a.head_dim = vq.size[3];
  if (vk.size[0] != a.batch || vk.size[3] != a.head_dim) return kGeneral;
  attn_strides(vq, bshd, a.q_stride);
  attn_strides(vk, bshd, a.k_stride);
  attn_strides(vv, bshd, a.v_stride);
  attn_strides(vo, bshd, a.o_stride);
  if (!lse.is_none()) {  // fp32 [B, Hq, Sq], contiguous (the Python layer allocates it)
    View vl;
    if (!view_of(lse, &vl) || vl.device != vq.device || vl.dtype != TESSERA_DTYPE_F32) return kGeneral;
    a.lse = reinterpret_cast<float*>(vl.ptr);
  }
  a.softmax_scale = scale;
  a.causal = causal;
  a.max_sms = max_sms;
  a.window_left = window_left;
  a.window_right = window_right;
  a.softcap = softcap;
  if (a.seqlen_q <= kDecodeMaxSeqlenQ) {  // only decode shapes use a workspace
    size_t need = 0;
    check(tessera::attention_workspace_size(a, &need));
    if (need > ws_bytes || (need > 0 && ws_cached && capturing(stream))) return int64_t(need);
  }
  tessera::Status s;
  {
    nb::gil_scoped_release release;
    s = tessera::attention(a, reinterpret_cast<void*>(stream), reinterpret_cast<void*>(ws), ws_bytes);
  }
  check(s);
  return 0;
}

}  // namespace

void bind_eager(nb::module_& m) {
  m.def(
      "set_torch_dtypes",
      [](nb::handle f16, nb::handle bf16, nb::handle f32, nb::handle s8, nb::handle s32, nb::handle e4m3,
         nb::handle e5m2) {
        auto obj = [](nb::handle h) { return h.is_none() ? nullptr : h.ptr(); };
        PyObject* objs[kDtypes] = {f16.ptr(), bf16.ptr(), f32.ptr(), obj(s8), obj(s32), obj(e4m3), obj(e5m2)};
        for (int i = 0; i < kDtypes; ++i) {
          Py_XINCREF(objs[i]);  // kept for the life of the process
          g_dtypes[i] = objs[i];
        }
      },
      "f16"_a, "bf16"_a, "f32"_a, "s8"_a.none() = nb::none(), "s32"_a.none() = nb::none(),
      "e4m3"_a.none() = nb::none(), "e5m2"_a.none() = nb::none(),
      "Registers torch.float16, torch.bfloat16, torch.float32 (and torch.int8, torch.int32: the int8\n"
      "GEMM's operands and exact output; torch.float8_e4m3fn, torch.float8_e5m2: the fp8 GEMM's\n"
      "operands) for the tensor entries.");
  m.def("matmul_tensors", &matmul_tensors, "a"_a, "b"_a, "c"_a.none(), "d"_a, "alpha"_a, "beta"_a, "bias"_a.none(),
        "activation"_a, "workspace"_a, "workspace_bytes"_a, "workspace_cached"_a, "stream"_a, "max_sms"_a,
        "precision"_a = 0, "scale_a"_a.none() = nb::none(), "scale_b"_a.none() = nb::none(),
        "d = act(alpha * a @ b + beta * c + bias) from torch tensors in one call: 0 when launched; the\n"
        "workspace bytes to allocate when the given workspace is too small (or is a cached one while\n"
        "the stream is capturing); -1 when the general path must handle the call. int8 and fp8 a and\n"
        "b: scale_a and scale_b (fp32 tensors, one element each or scale_a (M,)/(M, 1) and scale_b\n"
        "(N,)/(1, N); optional for fp8) dequantise to d's dtype. Raises as gemm().");
  m.def("attention_tensors", &attention_tensors, "q"_a, "k"_a, "v"_a, "o"_a, "lse"_a.none(), "causal"_a, "scale"_a,
        "bshd"_a, "stream"_a, "max_sms"_a, "workspace"_a, "workspace_bytes"_a, "workspace_cached"_a,
        "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0f,
        "Attention forward from torch tensors in one call: 0 when launched; the workspace bytes to\n"
        "allocate when the given workspace is too small (or is a cached one while the stream is\n"
        "capturing); -1 when the general path must handle the call. Raises as attention().");
}

}  // namespace tessera_python
