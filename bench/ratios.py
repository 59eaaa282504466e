#!/usr/bin/env python3
"""Markdown tables of medians and ratios from Google Benchmark JSON output.

Reads files written with --benchmark_out=FILE --benchmark_out_format=json and
--benchmark_repetitions=N --benchmark_report_aggregates_only=true. Benchmarks are
named BM_<workload>_<variant><T>/<arg>; within a workload and argument, every
variant is compared with a baseline variant (time of the baseline / time of the
variant: above 1 is faster than the baseline).

    bench/ratios.py elementwise.json contract.json
"""

import json
import re
import sys
from collections import defaultdict

# Workload -> (baseline variant, second variant to compare with, or None).
BASELINES = {
    "chain": ("eigen_fused", "eigen_unfused"),
    "rowscale": ("eigen_fused", "eigen_unfused"),
    "softmax": ("eigen_fused", "eigen_unfused"),
    "square": ("eigen", "cblas"),
    "square_bt": ("eigen_bt", "cblas_bt"),
    "scores": ("eigen_loop", "eigen_loop_omp"),
}

NAME = re.compile(r"^BM_(?P<workload>[a-z]+)_(?P<variant>[a-z_]+)<(?P<type>[^>]+)>"
                  r"(?:/(?:rows:)?(?P<arg>\d+))?")


def workload_of(workload, variant):
    # The transposed square products form their own group.
    if workload == "square" and variant.endswith("_bt"):
        return "square_bt"
    return workload


def load(paths):
    rows = defaultdict(dict)  # (workload, arg) -> variant -> {median, cv, rate...}
    context = None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = context or data.get("context", {})
        for b in data["benchmarks"]:
            m = NAME.match(b["run_name"])
            if not m or b.get("run_type") != "aggregate":
                continue
            workload = workload_of(m["workload"], m["variant"])
            key = (workload, int(m["arg"]) if m["arg"] else 0)
            entry = rows[key].setdefault(m["variant"], {})
            agg = b["aggregate_name"]
            if agg == "median":
                # Wall-clock for multi-threaded runs, the thread's CPU time otherwise.
                clock = "real_time" if b["run_name"].endswith("/real_time") else "cpu_time"
                entry["time"] = b[clock]
                entry["unit"] = b["time_unit"]
                for counter in ("bytes/s", "items/s", "FLOP/s", "threads"):
                    if counter in b:
                        entry[counter] = b[counter]
                entry["label"] = b.get("label", "")
            elif agg == "cv":
                clock = "real_time" if b["run_name"].endswith("/real_time") else "cpu_time"
                entry["cv"] = b[clock]
    return rows, context


def table(rows, workload):
    base, other = BASELINES[workload]
    keys = sorted(k for k in rows if k[0] == workload)
    if not keys:
        return ""
    flops = workload.startswith(("square", "scores"))
    rate = "GFLOP/s" if flops else "GB/s"
    head = [f"size", "variant", "median time", rate]
    if not flops:
        head.append("G items/s")
    head += ["cv", f"vs {base}"]
    if other:
        head.append(f"vs {other}")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        variants = rows[key]
        order = lambda name: (not name.startswith("attn"), name != base, name != other, name)
        for name in sorted(variants, key=order):
            e = variants[name]
            if "time" not in e:
                continue
            cells = [str(key[1]) if key[1] else "-", name, f"{e['time']:.3g} {e['unit']}"]
            if flops:
                cells.append(f"{e.get('FLOP/s', 0) / 1e9:.1f}")
            else:
                cells.append(f"{e.get('bytes/s', 0) / 1e9:.2f}")
                cells.append(f"{e.get('items/s', 0) / 1e9:.3f}")
            cells.append(f"{100 * e.get('cv', 0):.1f}%")
            for ref in (base, other):
                if ref is None:
                    continue
                r = variants.get(ref, {}).get("time")
                cells.append(f"{r / e['time']:.2f}" if r else "-")
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(paths):
    rows, context = load(paths)
    if context:
        print(f"<!-- {context.get('date', '')} {context.get('host_name', '')} "
              f"{context.get('num_cpus', '')} cpus -->")
    for workload in BASELINES:
        text = table(rows, workload)
        if text:
            print(f"\n#### {workload}\n")
            print(text)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
