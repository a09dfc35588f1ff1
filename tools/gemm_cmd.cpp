// `tessera gemm`: one GEMM through tessera; optionally checked against a cuBLASLt fp32 reference
// (--verify; int8 operands: exact int64 sums on the GPU; fp8 operands: cuBLASLt's fp32 GEMM of them
// widened to fp32, block scales applied to the widened operands) and timed against cuBLASLt on the
// same inputs (--compare cublas; int8: cuBLASLt's int8 -> int32 GEMM; fp8: cuBLASLt's fp8 GEMM with
// the same scales and accumulation mode; with block scales and --verify, cuBLASLt's D is checked
// against the same reference before it is timed).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "args.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "cublaslt_gemm.hpp"
#include "cuda_raii.hpp"
#include "device_helpers.hpp"
#include "device_info.hpp"
#include "gemm_buffers.hpp"
#include "gemm_problem.hpp"
#include "json.hpp"
#include "run_common.hpp"
#include "tessera/tessera.hpp"
#include "timing.hpp"
#include "verify.hpp"

namespace tessera_cli {
namespace {

std::vector<OptionSpec> gemm_options() {
  std::vector<OptionSpec> specs = gemm_problem_options();
  const std::vector<OptionSpec> run_specs = {
      {"verify", "", "check D against a cuBLASLt fp32-output reference (bias and activation applied to it in fp32; "
                     "poisoned D, guard bands); int8: against exact int64 sums computed on the GPU, an s32 D bit "
                     "for bit, a dequantised D against their fp32 dequantisation; e4m3 / e5m2: against cuBLASLt's "
                     "fp32 GEMM of the operands widened to fp32, dequantised (tolerance by D's dtype and the "
                     "accumulation mode; block scales applied to the widened operands, and with --compare "
                     "cuBLASLt's D checked too: where it fails, cuBLASLt is not timed); exit 1 on FAIL"},
      {"compare", "LIB", "also time LIB on the same inputs; LIB = cublas (cuBLASLt; for int8 its int8 -> int32 GEMM "
                         "on K-major operands, without the dequantisation; for e4m3 / e5m2 its fp8 GEMM on K-major "
                         "operands with the same scales and accumulation mode, e5m2 as e5m2 x e4m3; block scales "
                         "as VEC128_32F x BLK128x128_32F, cuBLAS 12.9+ on sm_90)"},
  };
  specs.insert(specs.end(), run_specs.begin(), run_specs.end());
  const std::vector<OptionSpec> common = run_options();  // --iters, --warmup, --seed, --json, --help
  specs.insert(specs.end(), common.begin(), common.end());
  return specs;
}

struct RunSettings : RunCommon {
  bool verify = false;
  bool compare = false;  // against cuBLASLt
};

RunSettings parse_run_settings(const Options& opts) {
  RunSettings r;
  static_cast<RunCommon&>(r) = parse_run_common(opts);
  r.verify = opts.has("verify");
  if (opts.has("compare")) {
    const std::string lib = opts.str("compare");
    if (lib != "cublas" && lib != "cublaslt") usage_error("--compare: unknown library '" + lib + "' (expected cublas)");
    r.compare = true;
  }
  return r;
}

// Everything a run produced, for the human-readable report and the JSON.
struct GemmReport {
  GemmReport(const DeviceInfo& d, const GemmProblem& p, const RunSettings& s) : device(d), problem(p), settings(s) {}

  const DeviceInfo& device;
  const GemmProblem& problem;
  const RunSettings& settings;
  std::string config;
  int input_sets = 1;
  size_t set_bytes = 0;
  std::optional<VerifyResult> verify;
  std::optional<VerifyResult> cublas_verify;  // cuBLASLt's D against the same reference (block-scaled fp8)
  TimingResult tessera;
  std::optional<TimingResult> cublas;
  std::string cublas_anchor;  // what cuBLASLt ran, where it is not the problem itself ("" = the same problem)
  std::string cublas_note;    // why the ratio reads differently, or why cuBLASLt did not run

  std::optional<double> ratio() const {
    if (!cublas || tessera.median_ms <= 0) return std::nullopt;
    return cublas->median_ms / tessera.median_ms;  // = tessera TFLOP/s / cuBLASLt TFLOP/s
  }
};

void print_verify_line(std::FILE* out, const char* head, const VerifyResult& v) {
  std::fprintf(out, "%s %s  rel_err %.3e (tol %.1e), %llu non-finite, guards %s\n", head, v.pass ? "PASS" : "FAIL",
               v.rel_err, v.tol, (unsigned long long)v.nonfinite, v.guards_ok ? "intact" : "OVERWRITTEN");
}

void print_report(std::FILE* out, const GemmReport& r) {
  const DeviceInfo& dev = r.device;
  const double flops = r.problem.flops();
  std::fprintf(out, "device    %s (cc %s, %d SMs, L2 %s)\n", dev.name.c_str(), dev.cc().c_str(), dev.sm_count,
               mib(dev.l2_bytes).c_str());
  std::fprintf(out, "problem   %s\n", r.problem.describe().c_str());
  std::fprintf(out, "config    %s%s\n", r.config.c_str(),
               r.problem.config.empty() ? " (automatic: tuning cache or heuristic)" : "");
  std::fprintf(out, "inputs    %d set%s of %s rotated, seed %llu\n", r.input_sets, r.input_sets > 1 ? "s" : "",
               mib(r.set_bytes).c_str(), (unsigned long long)r.settings.seed);
  if (r.verify) {
    const VerifyResult& v = *r.verify;
    if (v.exact)
      std::fprintf(out, "verify    %s  exact: %llu of %lld int32 sums differ from the int64 reference%s%s, guards %s\n",
                   v.pass ? "PASS" : "FAIL", (unsigned long long)v.mismatches,
                   (long long)(r.problem.m * r.problem.n * r.problem.batch),
                   v.first_mismatch.empty() ? "" : ", first at ", v.first_mismatch.c_str(),
                   v.guards_ok ? "intact" : "OVERWRITTEN");
    else
      print_verify_line(out, "verify   ", v);
  }
  if (r.cublas_verify) print_verify_line(out, "verify    cuBLASLt's D:", *r.cublas_verify);
  std::fprintf(out, "timing    median of %d samples after %d warm-up; %s\n", r.tessera.samples,
               r.settings.timing.warmup_samples, timing_mode_description(r.tessera.launches_per_sample).c_str());
  auto line = [&](const char* name, const TimingResult& t) {
    std::fprintf(out, "%-9s %10.4f ms  %9.2f %-7s  (min %.4f ms; host %.1f us/launch)\n", name, t.median_ms,
                 tflops(flops, t.median_ms), r.problem.throughput_unit(), t.min_ms, t.host_us_per_launch);
  };
  line("tessera", r.tessera);
  if (r.cublas) line("cuBLASLt", *r.cublas);
  if (!r.cublas_anchor.empty()) std::fprintf(out, "anchor    %s\n", r.cublas_anchor.c_str());
  if (!r.cublas_note.empty()) std::fprintf(out, "note      %s\n", r.cublas_note.c_str());
  if (r.cublas && !r.problem.int8() && (r.problem.has_bias() || r.problem.activation != tessera::Activation::None))
    std::fprintf(out, "note      cuBLASLt is timed without the bias and activation (its GEMM with alpha, beta only)\n");
  if (auto ratio = r.ratio()) std::fprintf(out, "ratio     %.3f (tessera / cuBLASLt)\n", *ratio);
}

void write_json(std::ostream& os, const GemmReport& r) {
  const GemmProblem& p = r.problem;
  const double flops = p.flops();
  JsonWriter j(os);
  j.begin_object();
  j.field("tool", "tessera gemm").field("tessera_version", tessera_version());
  j.field("gpu", r.device.name).field("cc", r.device.cc()).field("sms", r.device.sm_count);
  write_problem_json(j, p);
  j.field("config", r.config);
  j.field("tessera_ms", r.tessera.median_ms).field("tessera_tflops", tflops(flops, r.tessera.median_ms));
  if (r.cublas) {
    j.field("cublas_ms", r.cublas->median_ms).field("cublas_tflops", tflops(flops, r.cublas->median_ms));
  } else {
    j.key("cublas_ms").null().key("cublas_tflops").null();
  }
  j.field("ratio", r.ratio());
  j.key("cublas_anchor");
  if (r.cublas_anchor.empty()) j.null(); else j.value(r.cublas_anchor);
  j.key("cublas_note");
  if (r.cublas_note.empty()) j.null(); else j.value(r.cublas_note);
  for (auto [key, v] : {std::pair<const char*, const std::optional<VerifyResult>*>{"verify", &r.verify},
                         {"cublas_verify", &r.cublas_verify}}) {  // cublas_verify: cuBLASLt's D (block scales)
    j.key(key);
    if (!*v) {
      j.null();
      continue;
    }
    j.begin_object();
    j.field("rel_err", (*v)->rel_err).field("tol", (*v)->tol).field("pass", (*v)->pass);
    j.field("nonfinite", (*v)->nonfinite).field("guards_ok", (*v)->guards_ok);
    j.field("exact", (*v)->exact);
    j.key("mismatches");
    if ((*v)->exact) j.value((*v)->mismatches); else j.null();
    j.end_object();
  }
  j.field("timing_mode", r.tessera.launches_per_sample > 1 ? "batched" : "single");
  j.key("timing").begin_object();
  j.field("description", timing_mode_description(r.tessera.launches_per_sample));
  j.field("launches_per_sample", r.tessera.launches_per_sample);
  j.field("samples", r.tessera.samples).field("warmup_samples", r.settings.timing.warmup_samples);
  j.field("input_sets", r.input_sets).field("input_set_bytes", r.set_bytes);
  j.field("tessera_min_ms", r.tessera.min_ms);
  j.field("cublas_min_ms", r.cublas ? std::optional<double>(r.cublas->min_ms) : std::nullopt);
  j.field("tessera_host_us_per_launch", r.tessera.host_us_per_launch);
  j.field("cublas_host_us_per_launch", r.cublas ? std::optional<double>(r.cublas->host_us_per_launch) : std::nullopt);
  j.end_object();
  j.field("seed", r.settings.seed);
  j.field("commit", env("TESSERA_COMMIT"));
  j.field("date", utc_now_iso());
  j.end_object();
}

// ---- the int8 anchor -----------------------------------------------------------------------------
//
// cuBLASLt's int8 GEMM, CUBLAS_COMPUTE_32I: s8 x s8 -> s32 with int32 alpha 1 and beta 0. Its fast
// kernels take both operands K-major ("TN"), K and the rows of its D multiples of 4, aligned leading
// dimensions (seen on an H200, CUDA 13.0: K = 7777 had no algorithm at all, "NN", "NT", "TT" ran ~10x
// slower than "TN"). Where the problem is not so, cuBLASLt reads K-major copies made once before
// timing, K and its D's rows zero-padded where needed (the same sums; the extra work is reported, not
// counted in its TOPS); where D is not an int32 D with 16-byte aligned columns (rows), it writes to
// an int32 D of its own. A dequantised D is not part of cuBLASLt's work, so the ratio is conservative
// for tessera there.
struct Int8Anchor {
  GemmProblem problem;  // what cuBLASLt runs
  bool copies = false;  // A and B are K-major copies (one per input set)
  bool own_d = false;   // D is cuBLASLt's own (int32) buffer, not tessera's D
  std::vector<DeviceBuffer> a_copies, b_copies;
  DeviceBuffer d;
  std::optional<LtGemm> gemm;

  const void* a(size_t set, const InputSet& s) const { return copies ? a_copies[set].get() : s.a.get(); }
  const void* b(size_t set, const InputSet& s) const { return copies ? b_copies[set].get() : s.b.get(); }
};

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t pad16(int64_t x) { return round_up(x, 16); }

bool k_major_aligned(const StoredMatrix& s, bool k_major) {
  return k_major && s.ld % 16 == 0 && (s.broadcast() || s.batch_stride % 16 == 0);
}

// The K-major form of an operand as cuBLASLt reads it: K' x rows, column-major (each row of op(A),
// or column of op(B), K' contiguous bytes).
StoredMatrix k_major_copy(const StoredMatrix& src, int64_t k, int64_t rows) {
  StoredMatrix s;
  s.dtype = src.dtype;  // one byte an element: s8, e4m3 or e5m2
  s.rows = k;
  s.cols = rows;
  s.row_major = false;
  s.ld = round_up(k, 16);
  s.batch = src.batch;
  s.batch_stride = src.broadcast() ? 0 : s.ld * rows;
  return s;
}

// The operands of an 8-bit anchor: cuBLASLt's int8 and fp8 GEMMs take both K-major ("TN"). `pad` rounds K
// and cuBLASLt's m (the rows of its column-major D: M, or N for a row-major D) up as that GEMM needs; where
// that or an operand's layout differs from the problem's, q reads K-major copies of every input set (zeros
// in the padding), made here into a_copies / b_copies. Returns whether it copied.
template <class Pad>
bool k_major_anchor_operands(const GemmProblem& p, GemmProblem& q, const std::vector<InputSet>& sets, Pad pad,
                             std::vector<DeviceBuffer>& a_copies, std::vector<DeviceBuffer>& b_copies,
                             cudaStream_t stream) {
  if (p.d.row_major) q.n = pad(p.n);
  else q.m = pad(p.m);
  const bool a_k_major = (p.op_a == tessera::Op::T) != p.a.row_major;
  const bool b_k_major = (p.op_b == tessera::Op::N) != p.b.row_major;
  if (pad(p.k) == p.k && q.m == p.m && q.n == p.n && k_major_aligned(p.a, a_k_major) && k_major_aligned(p.b, b_k_major))
    return false;
  q.k = pad(p.k);
  q.op_a = tessera::Op::T;
  q.op_b = tessera::Op::N;
  q.layout = "tn";
  q.a = k_major_copy(p.a, q.k, q.m);
  q.b = k_major_copy(p.b, q.k, q.n);
  for (size_t i = 0; i < sets.size(); ++i) {
    a_copies.emplace_back(q.a.bytes());
    b_copies.emplace_back(q.b.bytes());
    CLI_CUDA_CHECK(cudaMemsetAsync(a_copies[i].get(), 0, q.a.bytes(), stream));  // the padding
    CLI_CUDA_CHECK(cudaMemsetAsync(b_copies[i].get(), 0, q.b.bytes(), stream));
    const int64_t a_batches = p.a.broadcast() ? 1 : p.batch, b_batches = p.b.broadcast() ? 1 : p.batch;
    copy_int8_k_major(int8_operand_a(p, sets[i].a.get()), p.m, p.k, a_batches, a_copies[i].as<int8_t>(), q.k, q.a.ld,
                      q.a.batch_stride, stream);
    copy_int8_k_major(int8_operand_b(p, sets[i].b.get()), p.n, p.k, b_batches, b_copies[i].as<int8_t>(), q.k, q.b.ld,
                      q.b.batch_stride, stream);
  }
  return true;
}

// Plans the anchor (copies included); gemm stays empty, with the report's note saying why, where
// cuBLASLt has no int8 algorithm for it.
void plan_int8_anchor(Int8Anchor& x, const GemmProblem& p, const std::vector<InputSet>& sets, cublasLtHandle_t lt,
                      size_t lt_workspace_bytes, cudaStream_t stream, GemmReport& report) {
  GemmProblem q = p;
  q.alpha = 1.0f;
  q.beta = 0.0f;
  q.bias_mode = tessera::BiasMode::None;
  q.bias_batch_stride = 0;
  q.activation = tessera::Activation::None;
  q.scale_mode = tessera::ScaleMode::None;
  q.config.clear();
  // K, and cuBLASLt's m (the rows of its column-major D: M, or N for a row-major D), zero-padded where
  // they are not multiples of 4, to multiples of 32: on an H200 (CUDA 13.0) M = K = 7777 had no
  // algorithm, K = 7780 ran at 424 TOPS, 7792 at 1130 and M = K = 7808 at 1630.
  auto pad = [](int64_t x) { return x % 4 != 0 ? round_up(x, 32) : x; };
  x.copies = k_major_anchor_operands(p, q, sets, pad, x.a_copies, x.b_copies, stream);
  // D: tessera's own where it is an int32 D of cuBLASLt's extents with 16-byte aligned columns (rows),
  // else an int32 D of cuBLASLt's own so aligned (with ldd = 7777 it also chose a slower kernel).
  q.d.dtype = tessera::DType::S32;
  x.own_d = p.d.dtype != tessera::DType::S32 || q.m != p.m || q.n != p.n || p.d.ld % 4 != 0 ||
            (p.batch > 1 && p.d.batch_stride % 4 != 0);
  if (x.own_d) {
    q.d.rows = q.m;
    q.d.cols = q.n;
    q.d.ld = round_up(q.d.inner(), 4);
    q.d.batch_stride = q.d.ld * q.d.outer();
    x.d = DeviceBuffer(q.d.bytes());
  }
  x.gemm.emplace(lt, q, tessera::DType::S32, lt_workspace_bytes, CUBLAS_COMPUTE_32I, /*required=*/false);
  x.problem = q;

  report.cublas_anchor = "cuBLASLt int8 GEMM, s8 x s8 -> s32 (CUBLAS_COMPUTE_32I), alpha 1, beta 0, A and B K-major";
  if (x.copies) {
    report.cublas_anchor += " (copies made before timing";
    std::string padded;
    for (auto [name, from, to] : {std::tuple<const char*, int64_t, int64_t>{"M", p.m, q.m}, {"N", p.n, q.n},
                                  {"K", p.k, q.k}})
      if (to != from) padded += std::string(padded.empty() ? "" : ", ") + name + " " + std::to_string(to);
    if (!padded.empty()) {
      char extra[64];
      std::snprintf(extra, sizeof extra, "; %.2f%% more work, not counted in its TOPS",
                    100.0 * (double(q.m) * double(q.n) * double(q.k) / (double(p.m) * double(p.n) * double(p.k)) - 1));
      report.cublas_anchor += ", zero-padded to " + padded + extra;
    }
    report.cublas_anchor += ")";
  }
  if (x.own_d) report.cublas_anchor += ", its own int32 D";
  if (!x.gemm->found()) {
    x.gemm.reset();
    report.cublas_note = "cuBLASLt has no int8 algorithm for this problem: not compared";
  } else if (p.d.dtype != tessera::DType::S32) {
    report.cublas_note = std::string("cuBLASLt computes the int32 sums only; tessera's time includes the "
                                     "dequantisation") + (p.has_scales() ? " (scales)" : "") + " and the " +
                         dtype_name(p.d.dtype) + " D" + (p.has_c() ? ", beta * C" : "") +
                         (p.has_bias() ? ", the bias" : "") +
                         (p.activation != tessera::Activation::None ? ", the activation" : "") +
                         ": the ratio is conservative for tessera";
  }
}

// ---- the fp8 anchor ------------------------------------------------------------------------------
//
// cuBLASLt's fp8 GEMM: CUBLAS_COMPUTE_32F with fp32 alpha, beta and scales, D (and C) bf16 / f16 /
// f32 as tessera's, the scales per tensor through CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER, row-wise
// as CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F vectors (where cuBLASLt has no such kernel: per
// tensor, and the note says so) or block scales as VEC128_32F (op(A)) and BLK128x128_32F (op(B)), read
// from tessera's own scale buffers (GemmProblem lays them out as cuBLASLt wants them; its block kernels
// take no fast accumulation, and tessera promotes block-scaled sums every 128 K anyway),
// CUBLASLT_MATMUL_DESC_FAST_ACCUM as --fast-accum. Its fp8 kernels take both operands K-major ("TN")
// with 16-byte aligned leading dimensions; where the problem is not so, or K or its m (the rows of its
// column-major D: M, or N for a row-major D) is not a multiple of 16, it reads K-major copies made once
// before timing, zero-padded to multiples of 16 (the same sums, and the same count of 128-deep K and N
// blocks; the extra work is reported, not counted in its TFLOP/s), and writes a D of its own (reading a
// C of its own: input set 0's C, zero-padded) where D does not fit. cuBLASLt has no e5m2 x e5m2 GEMM:
// for e5m2 operands it runs e5m2 x e4m3 with B's bytes read as e4m3 (finite values, like every e5m2
// value this tool draws; the same work and bytes, for the timing only). It reads input set 0's scales
// for every set.
struct Fp8Anchor {
  GemmProblem problem;  // what cuBLASLt runs
  bool copies = false;  // A and B are K-major copies (one per input set)
  bool own_d = false;   // D (and C) are cuBLASLt's own buffers, not tessera's
  // Its D of input set 0 is the problem's own (no e5m2 read as e4m3, row-wise scales run per tensor,
  // bias or activation left out), so --verify can check it against the same reference.
  bool same_result = false;
  std::vector<DeviceBuffer> a_copies, b_copies;
  DeviceBuffer d, c;
  DeviceBuffer scale_a, scale_b;  // row-wise: the vectors zero-padded to cuBLASLt's m and n
  std::optional<LtGemm> gemm;

  const void* a(size_t set, const InputSet& s) const { return copies ? a_copies[set].get() : s.a.get(); }
  const void* b(size_t set, const InputSet& s) const { return copies ? b_copies[set].get() : s.b.get(); }
  // Enqueues cuBLASLt's GEMM of input set `set`, into tessera's D or its own.
  cublasStatus_t try_run(size_t set, const InputSet& s, void* tessera_d, const DeviceBuffer& lt_workspace,
                         cudaStream_t stream) const {
    return gemm->try_run(a(set, s), b(set, s), own_d ? c.get() : s.c.get(), own_d ? d.get() : tessera_d,
                         lt_workspace.get(), stream);
  }
};

// The problem's M x N of every batch (`pd`: the problem's D, its extents and majorness) between two
// buffers laid out like D with other leading dimensions and batch strides (tessera's D, cuBLASLt's own).
void copy_d_region(const StoredMatrix& pd, const StoredMatrix& from, const void* src, const StoredMatrix& to, void* dst,
                   cudaStream_t stream) {
  const size_t e = dtype_bytes(pd.dtype);
  for (int64_t l = 0; l < pd.batch; ++l)
    CLI_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst) + size_t(l * to.batch_stride) * e, size_t(to.ld) * e,
                                     static_cast<const char*>(src) + size_t(l * from.batch_stride) * e,
                                     size_t(from.ld) * e, size_t(pd.inner()) * e, size_t(pd.outer()),
                                     cudaMemcpyDeviceToDevice, stream));
}

// cuBLASLt's D of input set 0 in tessera's D (copied there from its own where it writes one): what
// --verify checks.
void run_anchor_into(const Fp8Anchor& x, const GemmProblem& p, const InputSet& s0, void* tessera_d,
                     const DeviceBuffer& lt_workspace, cudaStream_t stream) {
  CLI_CUBLAS_CHECK(x.try_run(0, s0, tessera_d, lt_workspace, stream));
  if (x.own_d) copy_d_region(p.d, x.problem.d, x.d.get(), p.d, tessera_d, stream);
}

// Device bytes plan_fp8_anchor may allocate (at most): the padded copies, its own D and C, the scales.
size_t fp8_anchor_bytes(const GemmProblem& p) {
  const size_t mp = size_t(pad16(p.m)), np = size_t(pad16(p.n)), kp = size_t(pad16(p.k)), l = size_t(p.batch);
  return kp * (mp + np) * l + (p.has_c() ? 2 : 1) * mp * np * l * dtype_bytes(p.d.dtype) + (mp + np) * sizeof(float);
}

void plan_fp8_anchor(Fp8Anchor& x, const GemmProblem& p, const std::vector<InputSet>& sets, void* tessera_d,
                     cublasLtHandle_t lt, const DeviceBuffer& lt_workspace, cudaStream_t stream, GemmReport& report) {
  if (p.block_scales() && p.batch > 1) {  // tessera's one set of scales for every batch: cuBLASLt's rule unknown
    report.cublas_note = "cuBLASLt's block scales with --batch > 1 (one scale set per batch, or one for all?) are "
                         "not documented in its headers: not compared";
    return;
  }
  GemmProblem q = p;
  q.bias_mode = tessera::BiasMode::None;
  q.bias_batch_stride = 0;
  q.activation = tessera::Activation::None;
  q.config.clear();
  const bool e5m2 = p.a.dtype == tessera::DType::E5M2;
  x.copies = k_major_anchor_operands(p, q, sets, pad16, x.a_copies, x.b_copies, stream);  // zero bytes pad: +0.0
  if (e5m2) q.b.dtype = tessera::DType::E4M3;  // cuBLASLt: e5m2 x e4m3 (no e5m2 x e5m2)
  const int64_t d_elem = int64_t(dtype_bytes(p.d.dtype));
  x.own_d = q.m != p.m || q.n != p.n || (p.d.ld * d_elem) % 16 != 0 ||
            (p.batch > 1 && (p.d.batch_stride * d_elem) % 16 != 0);
  if (x.own_d) {
    q.d.rows = q.m;
    q.d.cols = q.n;
    q.d.ld = round_up(q.d.inner(), 16);
    q.d.batch_stride = q.d.ld * q.d.outer();
    x.d = DeviceBuffer(q.d.bytes());
    if (p.has_c()) {
      x.c = DeviceBuffer(q.d.bytes());
      CLI_CUDA_CHECK(cudaMemsetAsync(x.c.get(), 0, q.d.bytes(), stream));
      copy_d_region(p.d, p.d, sets[0].c.get(), q.d, x.c.get(), stream);
    }
  }
  const bool block = p.block_scales();  // tessera's scale buffers as they are (GemmProblem's layouts)
  const bool row_wise = p.scale_mode == tessera::ScaleMode::RowWise;
  const float* sa = sets[0].scale_a.as<float>();
  const float* sb = sets[0].scale_b.as<float>();
  if (row_wise) {  // cuBLASLt reads q.m and q.n values
    x.scale_a = DeviceBuffer(size_t(q.m) * sizeof(float));
    x.scale_b = DeviceBuffer(size_t(q.n) * sizeof(float));
    CLI_CUDA_CHECK(cudaMemsetAsync(x.scale_a.get(), 0, x.scale_a.bytes(), stream));
    CLI_CUDA_CHECK(cudaMemsetAsync(x.scale_b.get(), 0, x.scale_b.bytes(), stream));
    CLI_CUDA_CHECK(cudaMemcpyAsync(x.scale_a.get(), sa, size_t(p.m) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    CLI_CUDA_CHECK(cudaMemcpyAsync(x.scale_b.get(), sb, size_t(p.n) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    sa = x.scale_a.as<float>();
    sb = x.scale_b.as<float>();
  }
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));
  x.problem = q;

  // Planned, and tried once (some refusals surface only when the GEMM is enqueued); row-wise scales
  // fall back to one value each where cuBLASLt will not take the vectors.
  LtFp8Options opts;
  opts.scale_a = sa;
  opts.scale_b = sb;
  opts.fast_accum = p.fast_accum() && !block;
  bool outer_vec = row_wise && kLtHasScaleModes;
  const InputSet& s0 = sets[0];
  std::string refusal;  // cuBLASLt's error, where it raised one
  auto try_plan = [&]() -> bool {
    opts.scales = block ? LtScales::Block : outer_vec ? LtScales::OuterVec : LtScales::Scalar;
    x.gemm.reset();
    try {
      x.gemm.emplace(lt, q, q.d.dtype, lt_workspace.bytes(), CUBLAS_COMPUTE_32F, /*required=*/false, &opts);
    } catch (const CliError& e) {  // e.g. CUBLAS_STATUS_INVALID_VALUE for a combination it has no kernel for
      x.gemm.reset();
      refusal = e.what();
      return false;
    }
    if (!x.gemm->found()) return false;
    const cublasStatus_t st = x.try_run(0, s0, tessera_d, lt_workspace, stream);
    if (st == CUBLAS_STATUS_SUCCESS) CLI_CUDA_CHECK(cudaStreamSynchronize(stream));
    return st == CUBLAS_STATUS_SUCCESS;
  };
  bool ok = try_plan();
  bool row_wise_as_tensor = false;
  if (!ok && outer_vec) {
    outer_vec = false;
    row_wise_as_tensor = ok = try_plan();
  } else if (row_wise && !outer_vec) {
    row_wise_as_tensor = ok;
  }

  const char* a_name = dtype_name(p.a.dtype);
  const char* b_name = dtype_name(q.b.dtype);
  char alpha_beta[64];
  std::snprintf(alpha_beta, sizeof alpha_beta, "alpha %g, beta %g", double(p.alpha), double(p.beta));
  report.cublas_anchor = std::string("cuBLASLt fp8 GEMM, ") + a_name + " x " + b_name + " -> " +
                         dtype_name(p.d.dtype) + " (CUBLAS_COMPUTE_32F), " + alpha_beta + ", scales " +
                         (!p.has_scales()              ? std::string("none")
                          : block                      ? std::string("block (op(A)'s 1 x 128 as VEC128_32F, op(B)'s "
                                                                     "128 x 128 as BLK128x128_32F: tessera's buffers)")
                          : row_wise && outer_vec      ? std::string("row-wise (OUTER_VEC_32F)")
                          : row_wise                   ? std::string("per tensor (first value of each row-wise vector)")
                                                       : std::string("per tensor (A/B_SCALE_POINTER)")) +
                         ", FAST_ACCUM " + (opts.fast_accum ? "1" : "0") + ", A and B K-major";
  if (x.copies) {
    report.cublas_anchor += " (copies made before timing";
    std::string padded;
    for (auto [name, from, to] : {std::tuple<const char*, int64_t, int64_t>{"M", p.m, q.m}, {"N", p.n, q.n},
                                  {"K", p.k, q.k}})
      if (to != from) padded += std::string(padded.empty() ? "" : ", ") + name + " " + std::to_string(to);
    if (!padded.empty()) {
      char extra[64];
      std::snprintf(extra, sizeof extra, "; %.2f%% more work, not counted in its TFLOP/s",
                    100.0 * (double(q.m) * double(q.n) * double(q.k) / (double(p.m) * double(p.n) * double(p.k)) - 1));
      report.cublas_anchor += ", zero-padded to " + padded + extra;
    }
    report.cublas_anchor += ")";
  }
  if (x.own_d) report.cublas_anchor += std::string(", its own ") + dtype_name(p.d.dtype) + " D" +
                                       (p.has_c() ? " and C (input set 0's, zero-padded)" : "");
  if (e5m2) report.cublas_anchor += "; B's e5m2 bytes read as e4m3 (cuBLASLt has no e5m2 x e5m2 GEMM; the same work)";
  if (!ok) {
    x.gemm.reset();
    report.cublas_note = std::string("cuBLASLt has no fp8 algorithm for this problem (") + a_name + " x " + b_name +
                         " -> " + dtype_name(p.d.dtype) + (block ? ", block scales" : "") +
                         (block && !kLtHasScaleModes ? ": these cuBLAS headers (< 12.9) have none" : "") +
                         (refusal.empty() ? "" : ": " + refusal) + "): not compared";
  } else if (row_wise_as_tensor) {
    report.cublas_note = std::string("cuBLASLt ") + (kLtHasScaleModes ? "took no" : "headers have no") +
                         " row-wise (OUTER_VEC_32F) fp8 scales for this problem: it ran with one scale each, "
                         "so its D differs from tessera's (timing only)";
  }
  x.same_result = ok && !e5m2 && !row_wise_as_tensor && !p.has_bias() && p.activation == tessera::Activation::None;
}

}  // namespace

void print_gemm_help(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera gemm --m M --n N --k K [options]\n\n"
               "D = act(alpha * op(A) * op(B) + beta * C + bias) through tessera, on fresh random inputs uniform\n"
               "in [-1, 1] (bias and activation only with --bias / --activation).\n"
               "Matrices are column-major as in BLAS unless --d-row-major; FLOPs = 2*M*N*K*batch.\n"
               "--dtype int8: s8 operands uniform in [-128, 127], the 2*M*N*K*batch operations reported in\n"
               "TOPS; D s32 (the exact sums) or, with --scales, dequantised to bf16 / f16 / f32.\n"
               "--dtype e4m3 | e5m2 (Hopper): fp8 operands, values in [-4, 4] as the type holds them, scales per\n"
               "tensor by default (--scales), D bf16 by default (--out-dtype bf16 | f16 | f32), the sums promoted\n"
               "to fp32 every 128 K unless --fast-accum; --scales block (with --d-row-major): DeepSeek-V3's 1 x 128\n"
               "and 128 x 128 block scales, checked (--verify) against the dequantised operands' fp32 GEMM and\n"
               "compared (--compare cublas) with cuBLASLt's own block scaling, whose D --verify checks too.\n"
               "Without --compare only tessera is timed. Problems whose launch takes under %.0f us are timed\n"
               "as batches of back-to-back launches per event pair, the same way for both libraries; with\n"
               "--compare the two libraries' samples alternate, so that both see the same clocks.\n\n"
               "options:\n",
               kSmallProblemMs * 1e3);
  print_options(out, gemm_options());
  std::fprintf(out,
               "\nexamples:\n"
               "  tessera gemm --m 8192 --n 8192 --k 8192 --dtype bf16 --verify --compare cublas\n"
               "  tessera gemm --m 4096 --n 4096 --k 4096 --batch 8 --broadcast-b --layout nn --json out.json\n"
               "  tessera gemm --m 4096 --n 11008 --k 4096 --d-row-major --bias col --activation silu --verify\n"
               "  tessera gemm --m 8192 --n 8192 --k 8192 --dtype int8 --verify --compare cublas\n"
               "  tessera gemm --m 4096 --n 4096 --k 4096 --dtype int8 --scales row --out-dtype bf16 --verify\n"
               "  tessera gemm --m 8192 --n 8192 --k 8192 --dtype e4m3 --verify --compare cublas\n"
               "  tessera gemm --m 4096 --n 4096 --k 4096 --dtype e4m3 --scales row --fast-accum --verify --compare cublas\n"
               "  tessera gemm --m 4096 --n 7168 --k 16384 --dtype e4m3 --scales block --d-row-major --verify --compare cublas\n");
}

int run_gemm(const std::vector<std::string>& args) {
  const std::vector<OptionSpec> specs = gemm_options();
  const Options opts("gemm", specs, args);
  if (opts.has("help")) {
    print_gemm_help(stdout);
    return kExitOk;
  }
  const GemmProblem p = parse_gemm_problem(opts);
  const RunSettings settings = parse_run_settings(opts);
  const DeviceInfo device = require_device();
  // With JSON on stdout, the human-readable report moves to stderr so that stdout parses.
  std::FILE* human = human_stream(settings);

  // (int8: the reference is tessera's own kernel; cuBLASLt only for --compare.)
  const bool need_cublas = (settings.verify && !p.int8()) || settings.compare;
  const size_t set_bytes = InputSet::bytes_needed(p);
  // int8 --compare: K-major copies of A and B for cuBLASLt (at most), and its own int32 D.
  // fp8 --compare: the same, zero-padded to multiples of 16, and its own D and C.
  const size_t anchor_bytes =
      settings.compare && p.int8()
          ? size_t(round_up(p.k, 16)) * size_t(p.m + p.n) * size_t(p.batch) + p.d.elements() * sizeof(int32_t)
      : settings.compare && p.fp8() ? fp8_anchor_bytes(p)
                                    : 0;
  require_device_memory(p.d.bytes() + 2 * GuardedBuffer::kGuardBytes + set_bytes +
                        (need_cublas ? kCublasLtWorkspaceBytes : 0) + (settings.verify ? verify_device_bytes(p) : 0) +
                        anchor_bytes);

  Stream stream;
  GuardedBuffer d(p.d.bytes());
  std::vector<InputSet> sets;
  sets.emplace_back(p, settings.seed, 0, stream.get());
  const int wanted = input_sets_wanted(set_bytes, device.l2_bytes);
  while (int(sets.size()) < wanted && set_bytes + kExtraSetHeadroomBytes <= free_device_memory())
    sets.emplace_back(p, settings.seed, int(sets.size()), stream.get());

  std::vector<tessera::GemmArgs> tessera_args;
  for (const InputSet& s : sets)
    tessera_args.push_back(p.tessera_args(s.a.get(), s.b.get(), s.c.get(), s.bias.get(), d.data(),
                                          s.scale_a.as<float>(), s.scale_b.as<float>()));

  // tessera's argument errors surface here, before any GEMM runs. The workspace is allocated once,
  // for the largest need over the input sets (all equally aligned, so in practice the same).
  GemmReport report(device, p, settings);
  report.input_sets = int(sets.size());
  report.set_bytes = set_bytes;
  check_tessera(tessera::gemm_select_config(tessera_args[0], &report.config), "tessera::gemm_select_config");
  size_t workspace_bytes = 0;
  for (const tessera::GemmArgs& a : tessera_args) {
    size_t bytes = 0;
    check_tessera(tessera::gemm_workspace_size(a, &bytes), "tessera::gemm_workspace_size");
    workspace_bytes = std::max(workspace_bytes, bytes);
  }
  const DeviceBuffer workspace(workspace_bytes);
  const Launch tessera_launch = [&](int64_t i) {
    check_tessera(tessera::gemm(tessera_args[size_t(i) % tessera_args.size()], stream.get(), workspace.get(),
                                workspace.bytes()),
                  "tessera::gemm");
  };

  std::optional<LtHandle> lt;
  DeviceBuffer lt_workspace;
  if (need_cublas) {
    lt.emplace();
    lt_workspace = DeviceBuffer(kCublasLtWorkspaceBytes);
  }
  std::optional<LtGemm> anchor;
  Int8Anchor int8_anchor;
  Fp8Anchor fp8_anchor;
  Launch cublas_launch;
  if (settings.compare && p.fp8()) {
    plan_fp8_anchor(fp8_anchor, p, sets, d.data(), lt->get(), lt_workspace, stream.get(), report);
    if (fp8_anchor.gemm)
      cublas_launch = [&](int64_t i) {
        const size_t set = size_t(i) % sets.size();
        CLI_CUBLAS_CHECK(fp8_anchor.try_run(set, sets[set], d.data(), lt_workspace, stream.get()));
      };
  } else if (settings.compare && p.int8()) {
    plan_int8_anchor(int8_anchor, p, sets, lt->get(), lt_workspace.bytes(), stream.get(), report);
    if (int8_anchor.gemm)
      cublas_launch = [&](int64_t i) {
        const size_t set = size_t(i) % sets.size();
        const InputSet& s = sets[set];
        int8_anchor.gemm->run(int8_anchor.a(set, s), int8_anchor.b(set, s), nullptr,
                              int8_anchor.own_d ? int8_anchor.d.get() : d.data(), lt_workspace.get(), stream.get());
      };
  } else if (settings.compare) {
    // fp32 operands: tessera's tf32 against cuBLASLt's tf32; 3xTF32 against cuBLASLt's fp32.
    const bool tf32 = p.a.dtype == tessera::DType::F32 && p.precision != tessera::Precision::TF32x3;
    anchor.emplace(lt->get(), p, p.d.dtype, lt_workspace.bytes(),
                   tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    cublas_launch = [&](int64_t i) {
      const InputSet& s = sets[size_t(i) % sets.size()];
      anchor->run(s.a.get(), s.b.get(), s.c.get(), d.data(), lt_workspace.get(), stream.get());
    };
  }

  if (settings.verify) {
    // Block scales: cuBLASLt's D is checked against the same reference, so that scales it reads in
    // another layout than GemmProblem's show as an error here rather than as a speed.
    const bool check_anchor = p.block_scales() && fp8_anchor.gemm && fp8_anchor.same_result;
    VerifyResult anchor_result;
    const std::function<void()> run_anchor = [&] {
      run_anchor_into(fp8_anchor, p, sets[0], d.data(), lt_workspace, stream.get());
    };
    report.verify = verify_gemm(p, sets[0], d, [&] { tessera_launch(0); }, lt ? lt->get() : nullptr, lt_workspace,
                                stream.get(), check_anchor ? run_anchor : nullptr, &anchor_result);
    if (check_anchor) report.cublas_verify = anchor_result;
    if (check_anchor && !anchor_result.pass) {
      char why[160];
      std::snprintf(why, sizeof why, "rel_err %.3e, tol %.1e, %llu non-finite, guards %s", anchor_result.rel_err,
                    anchor_result.tol, (unsigned long long)anchor_result.nonfinite,
                    anchor_result.guards_ok ? "intact" : "OVERWRITTEN");
      report.cublas_note = std::string("cuBLASLt's D FAILED verification against the same reference (") + why +
                           "): the block-scale layouts it was given are not the ones it reads (or its kernel is "
                           "wrong); not compared";
      cublas_launch = nullptr;
    }
  }

  // Both libraries are timed the same way: the batch size comes from the faster one's launch time.
  const bool compare = settings.compare && cublas_launch;  // (int8, fp8: cuBLASLt may have no algorithm)
  double single_ms = estimate_launch_ms(tessera_launch, stream.get());
  if (compare) single_ms = std::min(single_ms, estimate_launch_ms(cublas_launch, stream.get()));
  TimingConfig timing = settings.timing;
  timing.launches_per_sample = launches_per_sample_for(single_ms);
  if (compare) {  // interleaved samples: both see the same clock and power history
    const std::vector<TimingResult> t = time_interleaved({tessera_launch, cublas_launch}, timing, stream.get());
    report.tessera = t[0];
    report.cublas = t[1];
  } else {
    report.tessera = time_launches(tessera_launch, timing, stream.get());
  }
  CLI_CUDA_CHECK(cudaGetLastError());

  print_report(human, report);
  if (settings.json_path) emit_json(*settings.json_path, [&](std::ostream& os) { write_json(os, report); });
  return report.verify && !report.verify->pass ? kExitVerifyFailed : kExitOk;
}

}  // namespace tessera_cli
