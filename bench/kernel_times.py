#!/usr/bin/env python3
"""Where a GPU's time goes, kernel by kernel, from Nsight Compute's CSV (scripts/gpu.sh's profile benchmark).

Reads the output of `ncu --csv --metrics gpu__time_duration.sum ...` (the details page, one row
a kernel and metric, or the raw page, one row a kernel with the metric as a column; any lines
that are not CSV, as ncu's own ==PROF== messages, are skipped) and prints the kernels' total
time, then the kernels grouped by function (the name before its template arguments), heaviest
first, then the heaviest kernels by full name.

Usage: bench/kernel_times.py CSV [--top 25] [--steps N] [--json FILE]
--steps N divides the totals by the N training steps the capture held.
"""
import argparse
import csv
import json
import sys

METRIC = "gpu__time_duration.sum"
NANOSECONDS = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def number(text):
    """ncu's numbers may carry thousands separators ("1,234.5")."""
    return float(text.replace(",", ""))


def function_of(kernel):
    """'void attn::kernels::softmax_rows<float>(float *, ...)' -> 'attn::kernels::softmax_rows'."""
    name = kernel.strip()
    if name.startswith("void "):
        name = name[len("void "):]
    cut = len(name)
    for mark in "<(":
        at = name.find(mark)
        if at > 0:
            cut = min(cut, at)
    return name[:cut].strip() or kernel


def kernel_times(lines):
    """[(kernel name, nanoseconds)] for every profiled launch, in the order of the file."""
    rows = list(csv.reader(line for line in lines if line.startswith('"')))
    if not rows:
        raise ValueError("no CSV rows: was ncu run with --csv, and did it profile any kernel?")
    header, body = rows[0], rows[1:]
    if "Kernel Name" not in header:
        raise ValueError(f"no 'Kernel Name' column in the header {header[:8]}...")
    kernel = header.index("Kernel Name")
    launches = []
    if "Metric Name" in header:  # the details page: a row per kernel and metric
        name, unit, value = (header.index(c) for c in ("Metric Name", "Metric Unit", "Metric Value"))
        for row in body:
            if len(row) > value and row[name] == METRIC:
                launches.append((row[kernel], number(row[value]) * NANOSECONDS[row[unit].strip()]))
    elif METRIC in header:  # the raw page: a row per kernel, the units in the first row
        column = header.index(METRIC)
        scale = 1.0
        for row in body:
            if len(row) <= column:
                continue
            if not row[kernel] and row[column] in NANOSECONDS:  # the units row
                scale = NANOSECONDS[row[column]]
                continue
            launches.append((row[kernel], number(row[column]) * scale))
    else:
        raise ValueError(f"neither a 'Metric Name' column nor a {METRIC} column: was ncu given --metrics {METRIC}?")
    if not launches:
        raise ValueError(f"no {METRIC} values in the CSV")
    return launches


def summary(launches, top):
    total = sum(ns for _, ns in launches)

    def grouped(key):
        groups = {}
        for kernel, ns in launches:
            g = groups.setdefault(key(kernel), [0, 0.0])
            g[0] += 1
            g[1] += ns
        ordered = sorted(groups.items(), key=lambda item: -item[1][1])[:top]
        return [{"name": name, "launches": n, "ms": ns / 1e6, "share": ns / total, "mean_us": ns / n / 1e3}
                for name, (n, ns) in ordered]

    return {"launches": len(launches), "total_ms": total / 1e6,
            "by_function": grouped(function_of), "by_kernel": grouped(lambda k: k)}


def print_table(title, rows, steps, width):
    per = f" a step (of {steps})" if steps > 1 else ""
    print(f"\n{title}\n\n| share | ms{per} | launches{per} | mean µs | kernel |\n| ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        name = r["name"] if len(r["name"]) <= width else r["name"][: width - 1] + "…"
        print(f"| {100 * r['share']:.1f} % | {r['ms'] / steps:.3f} | {r['launches'] / steps:g} | {r['mean_us']:.1f} | "
              f"`{name}` |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv", help="ncu's CSV output (a file)")
    p.add_argument("--top", type=int, default=25, help="rows in each table (default 25)")
    p.add_argument("--steps", type=int, default=1, help="training steps the capture held: totals per step")
    p.add_argument("--json", help="also write the summary to this file")
    args = p.parse_args(argv)
    if args.steps < 1 or args.top < 1:
        p.error("--steps and --top must be at least 1")
    try:
        with open(args.csv, encoding="utf-8", errors="replace") as f:
            launches = kernel_times(f)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"kernel_times.py: {args.csv}: {e}")
    s = summary(launches, args.top)
    s["steps"] = args.steps
    print(f"{s['launches']} kernel launches, {s['total_ms']:.3f} ms of GPU time"
          + (f": {s['total_ms'] / args.steps:.3f} ms and {s['launches'] / args.steps:g} launches a step"
             if args.steps > 1 else ""))
    print_table("By function (template arguments left out):", s["by_function"], args.steps, 100)
    print_table("By kernel:", s["by_kernel"], args.steps, 200)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=1)


if __name__ == "__main__":
    main()
