#!/usr/bin/env python3
"""bench/kernel_times.py on CSV written as Nsight Compute writes it (details and raw pages)."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import kernel_times  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def details_row(i, kernel, unit, value, metric="gpu__time_duration.sum"):
    return (f'"{i}","7","attn-train","127.0.0.1","{kernel}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


SOFTMAX = "void attn::kernels::softmax_rows<float>(float *, const float *, long, long, float)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
DETAILS = "\n".join([
    "==PROF== Connected to process 7 (attn-train)",
    HEADER,
    details_row(0, SOFTMAX, "nsecond", "1,500"),
    details_row(0, SOFTMAX, "byte", "99", metric="dram__bytes.sum"),
    details_row(1, GEMM, "usecond", "12.5"),
    details_row(2, "void attn::kernels::softmax_rows<__nv_bfloat16>(__nv_bfloat16 *)", "nsecond", "500"),
    "==PROF== Disconnected from process 7",
])
RAW = "\n".join([
    '"ID","Process ID","Kernel Name","gpu__time_duration.sum"',
    '"","","","nsecond"',
    f'"0","7","{SOFTMAX}","2,000"',
    f'"1","7","{GEMM}","6,000"',
])


class KernelTimes(unittest.TestCase):
    def test_the_details_page_gives_each_launch_its_time_in_nanoseconds(self):
        launches = kernel_times.kernel_times(io.StringIO(DETAILS))
        self.assertEqual(launches, [(SOFTMAX, 1500.0), (GEMM, 12500.0),
                                    ("void attn::kernels::softmax_rows<__nv_bfloat16>(__nv_bfloat16 *)", 500.0)])

    def test_the_raw_page_takes_its_units_from_the_units_row(self):
        self.assertEqual(kernel_times.kernel_times(io.StringIO(RAW)), [(SOFTMAX, 2000.0), (GEMM, 6000.0)])

    def test_kernels_group_by_function_without_template_arguments(self):
        s = kernel_times.summary(kernel_times.kernel_times(io.StringIO(DETAILS)), top=10)
        self.assertEqual(s["launches"], 3)
        self.assertAlmostEqual(s["total_ms"], 0.0145)
        first, second = s["by_function"]
        self.assertEqual((first["name"], first["launches"]), (GEMM, 1))
        self.assertEqual((second["name"], second["launches"]), ("attn::kernels::softmax_rows", 2))
        self.assertAlmostEqual(second["share"], 2000 / 14500)
        self.assertEqual(len(s["by_kernel"]), 3)

    def test_a_file_without_the_metric_is_refused_with_the_reason(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write('"ID","Kernel Name","Duration"\n"0","k","5"\n')
        try:
            with self.assertRaises(SystemExit) as stop:
                kernel_times.main([f.name])
            self.assertIn("was ncu given --metrics gpu__time_duration.sum?", str(stop.exception))
        finally:
            os.unlink(f.name)

    def test_per_step_tables_are_printed(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(DETAILS)
        try:
            out = io.StringIO()
            with redirect_stdout(out):
                kernel_times.main([f.name, "--steps", "2"])
            text = out.getvalue()
            self.assertIn("3 kernel launches, 0.015 ms of GPU time: 0.007 ms and 1.5 launches a step", text)
            self.assertIn("| 86.2 % | 0.006 | 0.5 | 12.5 | `sm90_xmma_gemm", text)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
