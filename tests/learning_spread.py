#!/usr/bin/env python3
"""The spread of what the learning tests measure, and what broken models score on the same
measures: every learning test repeated under the kernels of other CPUs, with 1 and 2 threads,
over several seeds of its data and initialisation. The tests' thresholds sit well outside the
spread and well inside what the controls score; docs/testing.md keeps the numbers.

The kernels: attn multiplies floats through oneDNN (when built with it, as scripts/test.sh
builds), whose instruction set ONEDNN_MAX_CPU_ISA caps, and doubles (and floats without oneDNN,
ATTN_DNNL=0) through OpenBLAS, whose kernels OPENBLAS_CORETYPE forces. A kernel set is written
ISA:CORE, both of one kind of machine: AVX512_CORE:SkylakeX (an Intel Xeon or an AMD Zen 4 or 5),
AVX2:Haswell (a Zen 3, an Intel without AVX-512), AVX:Sandybridge, SSE41:Prescott; ISA `none`
leaves oneDNN out (ATTN_DNNL=0): none:Haswell is an AVX2 machine whose attn was built without it.
Sets this CPU cannot run are skipped.

The learning tests:
  learn      tests/train/trainer_test.py, Learning: validation loss after 400 steps
  translate  tests/translate/translate_test.py, Translation: BLEU, chrF, brevity penalty and
             exact lines, greedy and beam 4, of a model trained 1 000 steps
  overfit    tests/unit/nn/model_test.cpp, "overfits a fixed batch": the loss after 200 steps,
             for the five initialisations the test itself runs
  precision  tests/train/trainer_test.py, Precision: learn's run in fp32, bf16 and fp16, and how
             closely the 16-bit runs follow fp32's (steps 1-50, 100-step windows)
The controls (with --controls): the learn and translate runs trained on targets that belong to
other sources (what a model that cannot use the source learns), and translate's model trained
for 0 steps (learn's and overfit's untrained loss is their first step's, measured anyway).

    python3 tests/learning_spread.py --build build [--kernels AVX2:Haswell,none:Haswell]
        [--threads 1,2] [--seeds 5] [--tests learn,translate,overfit,precision] [--controls]
        [--jobs 2] [--json FILE]

With the defaults it runs 32 jobs a kernel set (6 sets on a CPU with AVX-512: 192 jobs, about
365 trainings, since an overfit job trains 5 models and a precision job 3), and --controls 5
more. The kernel sets with an ISA measure oneDNN's kernels only in a build with oneDNN (the
`dnnl` option); elsewhere they measure OpenBLAS's under oneDNN's names, and the script says so.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "train"))
sys.path.insert(0, str(HERE / "translate"))
import machine  # noqa: E402

# OpenBLAS's Zen kernels compute what its Haswell kernels compute (docs/testing.md), and its
# Cooperlake's single-precision products are SkylakeX's: neither is a set of its own here.
KERNEL_SETS = ["AVX512_CORE:SkylakeX", "AVX2:Haswell", "AVX:Sandybridge", "SSE41:Prescott",
               "none:SkylakeX", "none:Haswell"]
# The CPU flag each oneDNN instruction set (ONEDNN_MAX_CPU_ISA) needs; what it needs beyond that
# flag (AVX512_CORE: BW, DQ, VL) every CPU with the flag and such kernels in OpenBLAS has too.
ISA_NEEDS = {"AVX512_CORE": "avx512bw", "AVX2": "avx2", "AVX": "avx", "SSE41": "sse4_1", "none": None}
TESTS = ["learn", "translate", "overfit", "precision"]


def seeds_of(index):
    """The test's own seeds for index 0, others after: (initialisation seed, corpus seed)."""
    return 1 + index, 7 + 2 * index  # the corpus takes seed and seed + 1 (validation)


def learn(build, work, index, threads, aligned=True, steps=400):
    import trainer_test
    trainer_test.TRAIN, trainer_test.WORK = build / "examples" / "attn-train", work
    seed, corpus_seed = seeds_of(index)
    out = work / "learn"
    trainer_test.learn(out, seed=seed, corpus_seed=corpus_seed, aligned=aligned, threads=threads, steps=steps)
    valid = trainer_test.metrics(out, "valid")
    steps_run = trainer_test.metrics(out)
    return {"valid_loss": valid[-1]["loss"] if valid else None, "valid_ppl": valid[-1]["ppl"] if valid else None,
            "first_loss": steps_run[0]["loss"] if steps_run else None}


def translate(build, work, index, threads, aligned=True, steps=1000):
    import translate_test
    translate_test.TRAIN = build / "examples" / "attn-train"
    translate_test.TRANSLATE = build / "examples" / "attn-translate"
    seed, corpus_seed = seeds_of(index)
    model = translate_test.train_model(work, seed=seed, corpus_seed=corpus_seed, aligned=aligned, threads=threads,
                                       steps=steps)
    result = {}
    for search, flags in (("greedy", ["--greedy"]), ("beam", ["--beam", 4])):
        scores, _, _ = translate_test.score(model, work / "toy", search, *flags, threads=threads)
        for key in ("bleu", "chrf", "brevity_penalty", "exact"):
            result[f"{search}_{key}"] = scores[key]
    return result


def precision(build, work, index, threads):
    import trainer_test
    trainer_test.TRAIN, trainer_test.WORK = build / "examples" / "attn-train", work
    seed, corpus_seed = seeds_of(index)
    runs = {p: work / p for p in ("fp32", "bf16", "fp16")}
    for name, out in runs.items():
        trainer_test.learn(out, "--precision", name, seed=seed, corpus_seed=corpus_seed, threads=threads)
    result = {f"valid_loss_{name}": trainer_test.metrics(out, "valid")[-1]["loss"] for name, out in runs.items()}
    for name in ("bf16", "fp16"):
        result[f"{name}_steps_1_50"], result[f"{name}_windows"] = trainer_test.following(runs["fp32"], runs[name])
    result["fp16_overflows"] = trainer_test.metrics(runs["fp16"])[-1]["overflows"]
    return result


OVERFIT_SEEDS = list(range(21, 26))  # the initialisations model_test.cpp runs


def overfit(build, work, index, threads):
    del work, index, threads  # the test runs its own seeds; start() set OMP_NUM_THREADS
    done = subprocess.run([str(build / "tests" / "unit" / "unit-model"), "--test-case=*overfits a fixed batch*"],
                          capture_output=True, text=True, timeout=600)
    found = re.findall(r"overfit seed (\d+): first (\S+), last (\S+)", done.stdout)
    if sorted(int(seed) for seed, _, _ in found) != OVERFIT_SEEDS:  # a renamed test or message loses none
        raise RuntimeError(f"unit-model (exit status {done.returncode}) printed no 'overfit seed' line for some of "
                           f"{OVERFIT_SEEDS}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return [{"seed": int(s), "first_loss": float(f), "final_loss": float(l)} for s, f, l in found]


def run_job(job):
    """One job in this process (started by main in a child with the job's environment)."""
    build = Path(job["build"])
    work = Path(tempfile.mkdtemp(prefix="attn-spread-"))
    try:
        kind = {"learn": learn, "translate": translate, "overfit": overfit, "precision": precision}[job["test"]]
        extra = {k: job[k] for k in ("aligned", "steps") if k in job}
        return kind(build, work, job["index"], job["threads"], **extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start(job):
    """Runs `job` in a child process whose environment forces its kernels and threads."""
    isa, core = job["kernels"].split(":")
    env = dict(os.environ, OPENBLAS_CORETYPE=core, OMP_NUM_THREADS=str(job["threads"]), OMP_WAIT_POLICY="passive")
    env.pop("ATTN_DNNL", None)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    if isa == "none":
        env["ATTN_DNNL"] = "0"
    else:
        env["ONEDNN_MAX_CPU_ISA"] = isa
    began = time.monotonic()
    done = subprocess.run([sys.executable, __file__, "--job", json.dumps(job)], capture_output=True, text=True,
                          env=env)
    job = dict(job, seconds=round(time.monotonic() - began, 1))
    try:
        if done.returncode == 0:
            return dict(job, result=json.loads(done.stdout))
    except json.JSONDecodeError:
        pass
    return dict(job, error=f"exit status {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")


def seeds_label(job):
    if job["test"] == "overfit":
        return f"seeds {OVERFIT_SEEDS[0]}-{OVERFIT_SEEDS[-1]}"
    seed, corpus_seed = seeds_of(job["index"])
    return f"--seed {seed}, corpus seed {corpus_seed}"


def rows(results):
    """(test, control, kernels, threads, metric, value) for every number measured."""
    for r in results:
        if "result" not in r:
            continue
        measured = r["result"] if isinstance(r["result"], list) else [r["result"]]
        for one in measured:
            for metric, value in one.items():
                if metric != "seed" and value is not None:
                    yield r["test"], r.get("control", ""), r["kernels"], r["threads"], metric, value


def spread(values):
    return f"{min(values):.4g} – {max(values):.4g}" if len(values) > 1 else f"{values[0]:.4g}"


def report(results):
    table = {}
    for test, control, kernels, threads, metric, value in rows(results):
        table.setdefault((test, control, metric), {}).setdefault((kernels, threads), []).append(value)
    lines = []
    for (test, control, metric), cells in sorted(table.items()):
        everything = [v for values in cells.values() for v in values]
        lines.append(f"{test}{' (' + control + ')' if control else ''} {metric}: {spread(everything)} "
                     f"over {len(everything)} runs")
        for (kernels, threads), values in sorted(cells.items()):
            lines.append(f"    {kernels:22s} {threads} thread(s): {spread(values)}")
    for r in results:
        if "error" in r:
            lines.append(f"failed: {r['test']} {r.get('control', '')} {r['kernels']} {r['threads']} thread(s) "
                         f"{seeds_label(r)}: {r['error']}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--build", type=Path, default=HERE.parent / "build", help="Meson build directory (build/)")
    parser.add_argument("--kernels", default=",".join(KERNEL_SETS),
                        help="kernel sets ISA:CORE, ONEDNN_MAX_CPU_ISA (or none: ATTN_DNNL=0) and "
                             "OPENBLAS_CORETYPE; those this CPU cannot run are skipped (%(default)s)")
    parser.add_argument("--threads", default="1,2", help="thread counts (%(default)s)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of data and initialisation (%(default)s)")
    parser.add_argument("--tests", default=",".join(TESTS), help="learning tests to run (%(default)s)")
    parser.add_argument("--controls", action="store_true", help="also train the controls (with the first kernel set, 2 threads)")
    parser.add_argument("--jobs", type=int, default=2, help="trainings run side by side (%(default)s)")
    parser.add_argument("--json", type=Path, help="write every job and its numbers to this file")
    args = parser.parse_args()
    if args.job:
        print(json.dumps(run_job(json.loads(args.job))))
        return 0

    tests = args.tests.split(",")
    if unknown := set(tests) - set(TESTS):
        parser.error(f"--tests: unknown {', '.join(sorted(unknown))}; choose from {', '.join(TESTS)}")
    build = args.build.resolve()
    needs = {"learn": ["examples/attn-train"], "translate": ["examples/attn-train", "examples/attn-translate"],
             "overfit": ["tests/unit/unit-model"], "precision": ["examples/attn-train"]}
    for program in sorted({p for test in tests for p in needs[test]}):
        if not (build / program).is_file():
            parser.error(f"{build / program} is missing: build first (meson compile -C {args.build})")
    _, flags = machine.cpu()
    known_cores = {name.lower(): name for name in machine.KERNELS_NEED}
    known_isas = {name.lower(): name for name in ISA_NEEDS}
    kernel_sets = []
    for kernels in args.kernels.split(","):
        isa, _, core = kernels.partition(":")
        if isa.lower() not in known_isas or not core:
            parser.error(f"--kernels: expected ISA:CORE with ISA one of {', '.join(ISA_NEEDS)}, got {kernels!r}")
        # OpenBLAS and oneDNN ignore case; the CPU check below does not
        isa, core = known_isas[isa.lower()], known_cores.get(core.lower(), core)
        needed = [flag for flag in (ISA_NEEDS[isa], machine.KERNELS_NEED.get(core)) if flag]
        if flags and (missing := [flag for flag in needed if flag not in flags]):
            print(f"skipping {isa}:{core}: this CPU lacks {', '.join(missing)}", file=sys.stderr)
        else:
            kernel_sets.append(f"{isa}:{core}")
    if not kernel_sets:
        parser.error("--kernels: this CPU can run none of them")
    if machine.onednn() is None and any(not k.startswith("none:") for k in kernel_sets):
        print("oneDNN (libdnnl.so.2) is not installed, so attn multiplies through OpenBLAS whatever "
              "--kernels names as oneDNN's instruction set", file=sys.stderr)
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: expected counts separated by commas, got {args.threads!r}")

    jobs = []
    for test in tests:
        for kernels in kernel_sets:
            for t in threads:
                for index in range(1 if test == "overfit" else args.seeds):
                    jobs.append({"test": test, "kernels": kernels, "threads": t, "index": index, "build": str(build)})
    if args.controls:
        default = kernel_sets[0]
        for test in set(tests) & {"learn", "translate"}:
            for index in range(2):
                jobs.append({"test": test, "control": "unaligned", "aligned": False, "kernels": default, "threads": 2,
                             "index": index, "build": str(build)})
        if "translate" in tests:  # learn's 0-step control is its first step's loss, measured anyway
            jobs.append({"test": "translate", "control": "0 steps", "steps": 0, "kernels": default, "threads": 2,
                         "index": 0, "build": str(build)})

    print(f"{machine.describe()}\n{len(jobs)} jobs, {args.jobs} at a time", file=sys.stderr)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in concurrent.futures.as_completed([pool.submit(start, job) for job in jobs]):
            done = future.result()
            results.append(done)
            what = done.get("result", done.get("error"))
            print(f"[{len(results)}/{len(jobs)}] {done['test']} {done.get('control', '')} {done['kernels']} "
                  f"{done['threads']} thread(s) {seeds_label(done)} ({done['seconds']} s): {what}",
                  file=sys.stderr, flush=True)
            if args.json:  # after every job: a stopped sweep keeps what it measured
                args.json.write_text(json.dumps({"machine": machine.describe(), "jobs": results}, indent=1))
    print(report(results))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
