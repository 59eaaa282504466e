#!/usr/bin/env python3
"""The spread of what the learning tests measure, and what broken models score on the same
measures: every learning test repeated under the OpenBLAS kernels of other CPUs
(OPENBLAS_CORETYPE), with 1 and 2 threads, over several seeds of its data and initialisation.
The tests' thresholds sit well outside the spread and well inside what the controls score;
docs/testing.md keeps the numbers.

The learning tests:
  learn      tests/train/trainer_test.py, Learning: validation loss after 400 steps
  translate  tests/translate/translate_test.py, Translation: BLEU, chrF, brevity penalty and
             exact lines, greedy and beam 4, of a model trained 1 000 steps
  overfit    tests/unit/nn/model_test.cpp, "overfits a fixed batch": the loss after 200 steps,
             for the five initialisations the test itself runs
The controls (with --controls): the learn and translate runs trained on targets that belong to
other sources (what a model that cannot use the source learns), and translate's model trained
for 0 steps (learn's and overfit's untrained loss is their first step's, measured anyway).

    python3 tests/learning_spread.py --build build [--core-types Haswell,Zen] [--threads 1,2]
        [--seeds 5] [--tests learn,translate,overfit] [--controls] [--jobs 2] [--json FILE]

With the defaults on a CPU without AVX-512 (SkylakeX skipped) it runs 88 jobs, and --controls 5
more: 70 minutes on a 2-vCPU AMD EPYC.
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

CORE_TYPES = ["Haswell", "Zen", "SkylakeX", "Sandybridge", "Prescott"]
TESTS = ["learn", "translate", "overfit"]


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
        kind = {"learn": learn, "translate": translate, "overfit": overfit}[job["test"]]
        extra = {k: job[k] for k in ("aligned", "steps") if k in job}
        return kind(build, work, job["index"], job["threads"], **extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start(job):
    """Runs `job` in a child process whose environment forces its kernels and threads."""
    env = dict(os.environ, OPENBLAS_CORETYPE=job["core"], OMP_NUM_THREADS=str(job["threads"]),
               OMP_WAIT_POLICY="passive")
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
    """(test, control, core, threads, metric, value) for every number measured."""
    for r in results:
        if "result" not in r:
            continue
        measured = r["result"] if isinstance(r["result"], list) else [r["result"]]
        for one in measured:
            for metric, value in one.items():
                if metric != "seed" and value is not None:
                    yield r["test"], r.get("control", ""), r["core"], r["threads"], metric, value


def spread(values):
    return f"{min(values):.4g} – {max(values):.4g}" if len(values) > 1 else f"{values[0]:.4g}"


def report(results):
    table = {}
    for test, control, core, threads, metric, value in rows(results):
        table.setdefault((test, control, metric), {}).setdefault((core, threads), []).append(value)
    lines = []
    for (test, control, metric), cells in sorted(table.items()):
        everything = [v for values in cells.values() for v in values]
        lines.append(f"{test}{' (' + control + ')' if control else ''} {metric}: {spread(everything)} "
                     f"over {len(everything)} runs")
        for (core, threads), values in sorted(cells.items()):
            lines.append(f"    {core:12s} {threads} thread(s): {spread(values)}")
    for r in results:
        if "error" in r:
            lines.append(f"failed: {r['test']} {r.get('control', '')} {r['core']} {r['threads']} thread(s) "
                         f"{seeds_label(r)}: {r['error']}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--build", type=Path, default=HERE.parent / "build", help="Meson build directory (build/)")
    parser.add_argument("--core-types", default=",".join(CORE_TYPES),
                        help="OPENBLAS_CORETYPE values; those this CPU cannot run are skipped (%(default)s)")
    parser.add_argument("--threads", default="1,2", help="thread counts (%(default)s)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds of data and initialisation (%(default)s)")
    parser.add_argument("--tests", default=",".join(TESTS), help="learning tests to run (%(default)s)")
    parser.add_argument("--controls", action="store_true", help="also train the controls (with the first core type, 2 threads)")
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
             "overfit": ["tests/unit/unit-model"]}
    for program in sorted({p for test in tests for p in needs[test]}):
        if not (build / program).is_file():
            parser.error(f"{build / program} is missing: build first (meson compile -C {args.build})")
    _, flags = machine.cpu()
    known = {name.lower(): name for name in machine.KERNELS_NEED}
    cores = []
    for core in args.core_types.split(","):
        core = known.get(core.lower(), core)  # OpenBLAS ignores case; the CPU check below does not
        needed = machine.KERNELS_NEED.get(core)
        if needed and flags and needed not in flags:
            print(f"skipping {core}: this CPU lacks {needed}", file=sys.stderr)
        else:
            cores.append(core)
    if not cores:
        parser.error("--core-types: this CPU can run none of them")
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: expected counts separated by commas, got {args.threads!r}")

    jobs = []
    for test in tests:
        for core in cores:
            for t in threads:
                for index in range(1 if test == "overfit" else args.seeds):
                    jobs.append({"test": test, "core": core, "threads": t, "index": index, "build": str(build)})
    if args.controls:
        default = cores[0]
        for test in set(tests) & {"learn", "translate"}:
            for index in range(2):
                jobs.append({"test": test, "control": "unaligned", "aligned": False, "core": default, "threads": 2,
                             "index": index, "build": str(build)})
        if "translate" in tests:  # learn's 0-step control is its first step's loss, measured anyway
            jobs.append({"test": "translate", "control": "0 steps", "steps": 0, "core": default, "threads": 2,
                         "index": 0, "build": str(build)})

    print(f"{machine.describe()}\n{len(jobs)} jobs, {args.jobs} at a time", file=sys.stderr)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in concurrent.futures.as_completed([pool.submit(start, job) for job in jobs]):
            done = future.result()
            results.append(done)
            what = done.get("result", done.get("error"))
            print(f"[{len(results)}/{len(jobs)}] {done['test']} {done.get('control', '')} {done['core']} "
                  f"{done['threads']} thread(s) {seeds_label(done)} ({done['seconds']} s): {what}",
                  file=sys.stderr, flush=True)
            if args.json:  # after every job: a stopped sweep keeps what it measured
                args.json.write_text(json.dumps({"machine": machine.describe(), "jobs": results}, indent=1))
    print(report(results))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
