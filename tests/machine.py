#!/usr/bin/env python3
"""Which machine the tests ran on: the CPU, and the OpenBLAS and oneDNN kernels the test programs get.

Debian's OpenBLAS picks its kernels per CPU at run time (OPENBLAS_CORETYPE forces another
CPU's), and so does oneDNN, which multiplies attn's floats when attn is built with it
(ONEDNN_MAX_CPU_ISA caps its instruction set; ATTN_DNNL=0 leaves the products to OpenBLAS).
A test of what a model learned sees the numbers they produce, so scripts/test.sh prints this
first and the learning tests add it to their failure messages.

    python3 tests/machine.py
"""

import ctypes
import os

# The CPU flag each forceable x86-64 kernel set needs; without it OpenBLAS stops with SIGILL.
KERNELS_NEED = {"SkylakeX": "avx512f", "Cooperlake": "avx512_bf16", "Haswell": "avx2", "Zen": "avx2",
                "Sandybridge": "avx", "Prescott": "sse3"}


def cpu():
    """(model name, flags) from /proc/cpuinfo, or what is known without it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return "unknown CPU", set()
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    if "pni" in flags:  # /proc/cpuinfo calls SSE3 "pni"
        flags.add("sse3")
    return fields.get("model name", "unknown CPU"), flags


def openblas():
    """OpenBLAS's configuration and the kernels it chose, or None when it is not installed."""
    try:
        library = ctypes.CDLL("libopenblas.so.0")
        library.openblas_get_config.restype = ctypes.c_char_p
        library.openblas_get_corename.restype = ctypes.c_char_p
        return library.openblas_get_config().decode(), library.openblas_get_corename().decode()
    except (OSError, AttributeError):  # not installed, or too old to say
        return None


def onednn():
    """oneDNN's version, or None when it is not installed."""
    try:
        library = ctypes.CDLL("libdnnl.so.2")

        class Version(ctypes.Structure):
            _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                        ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]

        library.dnnl_version.restype = ctypes.POINTER(Version)
        v = library.dnnl_version().contents
        return f"{v.major}.{v.minor}.{v.patch}"
    except (OSError, AttributeError):
        return None


def describe():
    """One line: CPU, cores, OpenBLAS and oneDNN kernels, and what the environment forces."""
    model, flags = cpu()
    parts = [f"{model}, {len(os.sched_getaffinity(0))} CPUs"]
    blas = openblas()
    if blas is None:
        parts.append("no OpenBLAS (libopenblas.so.0) to ask")
    else:
        config, core = blas
        version = " ".join(config.split()[:2])
        forced = os.environ.get("OPENBLAS_CORETYPE")
        parts.append(f"{version} with {core} kernels" + (" (chosen for this CPU)" if forced is None else
                                                          f" (OPENBLAS_CORETYPE={forced!r})"))
        needed = KERNELS_NEED.get(core)
        if needed and flags and needed not in flags:
            parts.append(f"this CPU lacks {needed}: {core} kernels will stop with SIGILL")
    dnnl = onednn()
    if dnnl is not None:
        if os.environ.get("ATTN_DNNL") == "0":
            parts.append(f"oneDNN {dnnl} (ATTN_DNNL=0: not used)")
        else:
            cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
            parts.append(f"oneDNN {dnnl} for float products (if attn was built with it), "
                         + (f"ONEDNN_MAX_CPU_ISA={cap}" if cap else "its kernels chosen for this CPU"))
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads:
        parts.append(f"OMP_NUM_THREADS={threads}")
    return "; ".join(parts)


if __name__ == "__main__":
    print(describe())
