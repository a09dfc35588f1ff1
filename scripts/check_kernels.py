#!/usr/bin/env python3
"""Checks the compiled kernels of a tessera build: a register spill is an error, and every
tensor-core GEMM / attention kernel must contain the matrix instruction of its path (HMMA for the sm_80
mma.sync kernels, on both the sm_80 and sm_90 SASS; HGMMA for the sm_90a TMA/WGMMA kernels; the s8
kernels' IMMA / IGMMA and the fp8 kernels' QGMMA count as such). The skinny GEMM's kernels for up to 16
rows of X must fit two CTAs per SM (128 registers): skinny::w_tiles counts on it. The kernels launched
as programmatic dependent launches (the skinny GEMM, decode attention) must wait for the previous
kernel on Hopper: their Hopper image is sm_90a (compute_90a keeps griddepcontrol) and holds ACQBULK.

Usage: scripts/check_kernels.py [path/to/libtessera.a]   (default: build/libtessera.a)
Uses cuobjdump (CUDA toolkit); needs no GPU.
"""
import os
import re
import shutil
import subprocess
import sys


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def main() -> int:
    lib = sys.argv[1] if len(sys.argv) > 1 else "build/libtessera.a"
    here = os.path.dirname(os.path.abspath(__file__))
    pip_bin = os.path.join(here, "..", "deps", "cudabin", "nvidia", "cu13", "bin")
    candidates = [shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump", os.path.join(pip_bin, "cuobjdump")]
    tool = next((c for c in candidates if c and os.path.exists(c)), None)
    if not shutil.which("nvdisasm") and os.path.exists(os.path.join(pip_bin, "nvdisasm")):
        os.environ["PATH"] = os.path.abspath(pip_bin) + os.pathsep + os.environ.get("PATH", "")
    if tool is None:
        print("check_kernels: cuobjdump not found (run scripts/setup_deps.sh)", file=sys.stderr)
        return 1
    # Resource usage: lines "Function NAME:" followed by "REG:n STACK:n SHARED:n LOCAL:n ...".
    res = run([tool, "-res-usage", lib])
    arch = "?"
    kernels = {}
    failures = []
    func = None
    for line in res.splitlines():
        m = re.search(r"arch = (sm_\d+a?)", line)
        if m:
            arch = m.group(1)
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            func = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)
        if m and func:
            reg, stack, _, local = map(int, m.groups())
            kernels[(func, arch)] = reg
            if stack or local:
                failures.append(f"spill/stack: {func} [{arch}] REG={reg} STACK={stack} LOCAL={local}")
            func = None
    if not kernels:
        print(f"check_kernels: no kernels found in {lib}", file=sys.stderr)
        return 1
    # skinny_kernel<BF16, kMT = 1, ...>: 256 threads, two resident per SM (skinny.hpp kCtasPerSm).
    for (func, karch), reg in kernels.items():
        if re.search(r"6skinny13skinny_kernelILb[01]ELi1E", func) and reg > 128:
            failures.append(f"skinny kernel over 128 registers (two CTAs per SM): {func} [{karch}] REG={reg}")

    # SASS: the matrix instruction each tensor-core kernel family must issue (mangled-name marker).
    # The warp-specialised attention family must also load by TMA (UTMALDG).
    families = {"4sm8011gemm_kernel": ("HMMA",), "4sm8016attention_kernel": ("HMMA",), "4sm9011gemm_kernel": ("HGMMA",),
                "4sm9016attention_kernel": ("HGMMA",), "6sm90ws16attention_kernel": ("HGMMA", "UTMALDG")}
    sass = run([tool, "-sass", lib])
    current, arch, ops = None, "?", {}
    for line in sass.splitlines():
        m = re.search(r"arch = (sm_\d+a?)", line)
        if m:
            arch = m.group(1)
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = (m.group(1), arch)
            ops[current] = set()
        elif current:
            # The s8 (integer) and fp8 kernels' forms count as their family's matrix instruction.
            for op, family_op in (("HGMMA", "HGMMA"), ("IGMMA", "HGMMA"), ("QGMMA", "HGMMA"), ("HMMA", "HMMA"),
                                  ("IMMA", "HMMA"), ("UTMALDG", "UTMALDG"), ("ACQBULK", "ACQBULK")):
                if re.search(r"\b" + op + r"[.\s;]", line):
                    ops[current].add(family_op)
    tc = []
    for k in ops:
        wants = next((w for marker, w in families.items() if marker in k[0]), None)
        if wants is None:
            continue
        tc.append(k)
        for want in wants:
            if want not in ops[k]:
                failures.append(f"no {want} in tensor-core kernel {k[0]} [{k[1]}]")
    # Dependent launches (cudaLaunchAttributeProgrammaticStreamSerialization on cc 9.x): the wait.
    dependent = [k for k in ops if re.search(r"6skinny13skinny_kernel|6decode13decode_kernel|6decode14combine_kernel", k[0])]
    for k in dependent:
        if k[1] == "sm_90":
            failures.append(f"dependent-launch kernel with sm_90 SASS from compute_80 (no wait): {k[0]}")
        elif k[1] == "sm_90a" and "ACQBULK" not in ops[k]:
            failures.append(f"dependent-launch kernel that does not wait for the previous grid: {k[0]} [{k[1]}]")
    if not any(k[1] == "sm_90a" for k in dependent):
        failures.append("no sm_90a image of the skinny GEMM / decode attention kernels")
    n_sm90 = sum(1 for k in tc if "4sm9011gemm_kernel" in k[0])
    if n_sm90 == 0:
        failures.append("no sm_90a GEMM kernel found (expected the TMA/WGMMA family)")
    n_sm90_attn = sum(1 for k in tc if "4sm9016attention_kernel" in k[0])
    if n_sm90_attn == 0:
        failures.append("no sm_90a attention kernel found (expected the WGMMA family)")
    n_sm90ws = sum(1 for k in tc if "6sm90ws16attention_kernel" in k[0])
    if n_sm90ws == 0:
        failures.append("no sm_90a warp-specialised attention kernel found (expected the TMA/WGMMA family)")
    print(f"check_kernels: {len(kernels)} kernel images, {len(tc)} tensor-core kernel images checked "
          f"({n_sm90} sm_90a WGMMA GEMM, {n_sm90_attn} + {n_sm90ws} sm_90a WGMMA attention, cp.async + TMA); "
          f"max registers {max(kernels.values())}")
    for f in failures:
        print("check_kernels: FAIL " + f, file=sys.stderr)
    return 1 if failures or not tc else 0


if __name__ == "__main__":
    sys.exit(main())
