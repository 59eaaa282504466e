#!/usr/bin/env python3
"""End-to-end tests of attn-train and attn-average on a generated toy corpus (toy_corpus.py):
learning, bit-identical resumption, data-parallel processes under mpirun, bfloat16 and float16
training (--precision) against float32, float16's loss scaling through an overflow and a
resume, and every kind of bad input the trainer promises to report.

    python3 tests/train/trainer_test.py BUILD/examples/attn-train BUILD/examples/attn-average [unittest args]
"""

import json
import math
import os
import random
import re
import resource
import shutil
import signal
import string
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import machine  # noqa: E402
import safetensors_read  # noqa: E402
import stop_signals  # noqa: E402
import toy_corpus  # noqa: E402

TRAIN = AVERAGE = None  # set from the command line
WORK = None             # a temporary directory for the whole run

# Small, fast models: tiny's widths with one layer. The tests of the trainer's mechanics use
# 64 subwords. The learning test uses 128, with which every toy word is one subword (64 spell
# most of them letter by letter), so what it learns is the reordering, as a translation would.
ONE_LAYER = ["--config", "tiny", "--layers", "1", "--warmup", "100", "--lr-scale", "0.3"]
MODEL = ONE_LAYER + ["--vocab-size", "64"]
LEARNING_MODEL = ONE_LAYER + ["--vocab-size", "128"]


def corpus(seed=7, aligned=True):
    """attn-train's data flags for 2 000 toy training pairs drawn with `seed` (aligned=False:
    each target belongs to another source) and 200 validation pairs drawn with seed + 1."""
    data = WORK / (f"toy-{seed}" if aligned else f"toy-{seed}-unaligned")
    if not (data / "train.src").exists():
        toy_corpus.write(data, "train", 2000, seed=seed, aligned=aligned)
        toy_corpus.write(data, "valid", 200, seed=seed + 1)
    return ["--src", str(data / "train.src"), "--tgt", str(data / "train.tgt"),
            "--valid-src", str(data / "valid.src"), "--valid-tgt", str(data / "valid.tgt")]


def run(args, expect=0, program=None, **kwargs):
    """Runs attn-train (or `program`) and checks its exit status; returns the process."""
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    done = subprocess.run([str(program or TRAIN)] + [str(a) for a in args], capture_output=True, text=True,
                          env=env, timeout=900, **kwargs)
    if done.returncode != expect:
        raise AssertionError(f"exit status {done.returncode}, expected {expect}\n--- args: {args}\n"
                             f"--- stderr:\n{done.stderr[-4000:]}")
    return done


def train(out, *extra, expect=0, threads=1, batch_tokens=150, **kwargs):
    return run(corpus() + MODEL + ["--batch-tokens", batch_tokens, "--threads", threads, "--out", out]
               + list(extra), expect=expect, **kwargs)


def mpi_job(test):
    """mpirun and the environment of a job under it (root allowed, more processes than cores);
    skips `test` where mpirun is missing."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        test.skipTest("mpirun not found (apt-get install openmpi-bin)")
    return mpirun, dict(os.environ, OMP_WAIT_POLICY="passive", OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")


def children_of(pid):
    """The pids of the processes whose parent is `pid`."""
    children = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return children


def rank_process(rank, mpirun):
    """The pid of attn-train's process of MPI rank `rank` that `mpirun` (a pid) started, or None."""
    for pid in children_of(mpirun):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ and str(TRAIN).encode() in command_line:
            return pid
    return None


def end_job(mpirun):
    """SIGKILL to `mpirun` (a Popen) and to the processes it started, each in a process group of its own."""
    for pid in children_of(mpirun.pid) + [mpirun.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def metrics(out, kind="train"):
    lines = (Path(out) / "metrics.jsonl").read_text().splitlines()
    return [record for record in map(json.loads, lines) if record["kind"] == kind]


def floats(tensor):
    dtype, shape, data = tensor
    assert dtype == "F32", dtype
    return struct.unpack(f"<{len(data) // 4}f", data)


def model_tensors(path):
    _, tensors = safetensors_read.load(path)
    return {name: floats(t) for name, t in tensors.items() if name.startswith("model.")}


def learn(out, *extra, seed=1, corpus_seed=7, aligned=True, threads=1, steps=400):
    """The learning test's run (tests/learning_spread.py repeats it over seeds, threads and BLAS
    kernels): LEARNING_MODEL for `steps` steps, validated every 200; returns the process. One
    thread: a second saves this small model almost nothing, and the tests beside it use the core."""
    return run(corpus(corpus_seed, aligned) + LEARNING_MODEL +
               ["--batch-tokens", 600, "--threads", threads, "--seed", seed, "--out", out, "--max-steps", steps,
                "--valid-every", 200, "--save-every", 200, "--log-every", 100, "--dropout", 0] + list(extra))


_learned = None


def learned():
    """The learning test's run in fp32, trained once for the tests that read it (Learning,
    Precision): the output directory and the process."""
    global _learned
    if _learned is None:
        out = WORK / "learn"
        _learned = out, learn(out, "--plot", "--precision", "fp32")
    return _learned


class Learning(unittest.TestCase):
    def test_a_tiny_model_learns_the_toy_translation(self):
        out, done = learned()
        valid = metrics(out, "valid")
        self.assertEqual([v["step"] for v in valid], [200, 400])
        # Thresholds far from both sides of what tests/learning_spread.py measured (docs/testing.md)
        # over oneDNN's AVX-512, AVX2, AVX and SSE4.1 kernels and OpenBLAS's alone (SkylakeX and
        # Haswell), 1 and 2 threads and 5 seeds: validation loss 0.89-1.15, perplexity 1.21-1.64
        # after 400 steps (the floor with ε_ls = 0.1 and 128 classes is 0.80); a model that cannot
        # use the source (trained on misaligned pairs) ends at loss 3.21-3.22, perplexity 17.0-17.2.
        where = machine.describe()
        print(f"\nlearned: validation loss {valid[-1]['loss']:.4f}, perplexity {valid[-1]['ppl']:.4f} on {where}",
              file=sys.stderr)  # in the log even when it passes
        self.assertLess(valid[-1]["loss"], 2.0, f"{valid} on {where}")
        self.assertLess(valid[-1]["ppl"], 4.0, f"{valid} on {where}")
        steps = metrics(out)
        self.assertEqual(len(steps), 400)
        self.assertGreater(steps[0]["loss"], 3.5)  # untrained: 6.23-6.73 measured, about ln 128 = 4.85 or more
        for key in ("loss", "ppl", "lr", "grad_norm", "tokens", "tokens_per_s", "elapsed_s"):
            self.assertIn(key, steps[-1])
        self.assertIn("validation ppl", done.stderr)
        self.assertIn("step 400/400 | loss", done.stderr)
        self.assertIn("ETA", done.stderr)
        for name in ("vocab.model", "checkpoint-00000200.safetensors", "checkpoint-00000400.safetensors"):
            self.assertTrue((out / name).is_file(), name)
        self.assertEqual((out / "training.png").read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


def following(fp32, other):
    """How closely a run follows the float32 run of the same seed and batches: the largest
    relative difference of the losses of steps 1-50 (before the runs' rounding differences
    grow into different trajectories, as any two runs' do), and that of the mean loss of each
    100 steps."""
    a, b = ({r["step"]: r["loss"] for r in metrics(out)} for out in (fp32, other))
    early = max(abs(b[s] / a[s] - 1) for s in range(1, 51))
    windows = max(abs(sum(b[s] for s in range(lo, lo + 100)) / sum(a[s] for s in range(lo, lo + 100)) - 1)
                  for lo in range(1, 400, 100))
    return early, windows


class Precision(unittest.TestCase):
    def test_bf16_and_fp16_training_follows_the_fp32_run(self):
        # The learning test's run (400 steps) in the three precisions, from the same weights and
        # batches. Over the learning test's kernels, threads and 5 seeds (docs/testing.md): steps
        # 1-50 within 0.078-0.119 % (bf16) and 0.022-0.030 % (fp16) of fp32's losses, every
        # 100-step window's mean within 0.1-7.3 % and 0.5-14.6 % (the runs' rounding differences
        # grow into different trajectories after ~100 steps, as any two runs' do), validation
        # loss 0.88-1.19 and 0.87-1.22 (fp32 0.89-1.15); fp16 skipped 0 to 2 steps whose
        # gradients overflowed at the initial scale 65536. A run that does not learn is 200 %
        # off fp32's last windows.
        runs = {}
        for precision in ("fp32", "bf16", "fp16"):
            if precision == "fp32":  # the learning test's run
                runs[precision], done = learned()
            else:
                runs[precision] = WORK / f"learn-{precision}"
                done = learn(runs[precision], "--precision", precision)
            self.assertIn(f"precision {precision}", done.stderr)
        where = machine.describe()
        for precision in ("bf16", "fp16"):
            early, windows = following(runs["fp32"], runs[precision])
            valid, valid_fp32 = metrics(runs[precision], "valid")[-1], metrics(runs["fp32"], "valid")[-1]
            print(f"\n{precision}: steps 1-50 within {100 * early:.3f} %, 100-step windows within {100 * windows:.2f} %"
                  f" of fp32; validation loss {valid['loss']:.4f} (fp32 {valid_fp32['loss']:.4f}) on {where}",
                  file=sys.stderr)
            self.assertLess(early, 0.01, f"{precision} on {where}")
            self.assertLess(windows, 0.30, f"{precision} on {where}")
            # The learning test's thresholds: it learns as fp32 does (docs/testing.md).
            self.assertLess(valid["loss"], 2.0, f"{precision} on {where}")
            self.assertLess(valid["ppl"], 4.0, f"{precision} on {where}")
        # Checkpoints hold float32 weights whatever the precision.
        meta, tensors = safetensors_read.load(runs["bf16"] / "checkpoint-00000400.safetensors")
        self.assertEqual({t[0] for t in tensors.values()}, {"F32"})
        self.assertNotIn("attn.loss_scale", meta)

    def test_fp16_loss_scaling_skips_an_overflow_and_halves_the_scale(self):
        # 2⁴⁰ overflows float16 at once (the logits' gradient alone is (p − q)/tokens · 2⁴⁰): the
        # first steps are skipped, the scale halving each time, until the gradients fit; then
        # training goes on, every step numbered once.
        out = WORK / "fp16-overflow"
        done = train(out, "--precision", "fp16", "--loss-scale", 2 ** 40, "--loss-scale-window", 3,
                     "--max-steps", 12, "--save-every", 12)
        skipped = metrics(out, "skipped")
        first = [r["loss_scale"] for r in skipped if r["step"] == 1]  # before the first step is taken
        self.assertGreater(len(first), 0)
        self.assertEqual(first, [2 ** 40 / 2 ** (k + 1) for k in range(len(first))])
        self.assertEqual(skipped[0]["reason"], "float16 gradients overflowed at loss scale 1099511627776; now 549755813888")
        self.assertIn("attn-train: step 1 skipped: float16 gradients overflowed at loss scale 1099511627776", done.stderr)
        steps = metrics(out)
        self.assertEqual([r["step"] for r in steps], list(range(1, 13)))
        self.assertTrue(all(math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]) for r in steps))
        self.assertEqual(steps[0]["overflows"], len(first))
        self.assertEqual(steps[0]["loss_scale"], first[-1])
        self.assertEqual(steps[-1]["overflows"], len(skipped))
        # In the log's order: every overflow halves the scale; three finite steps in a row
        # (--loss-scale-window 3) double it.
        scale, finite_in_row = 2.0 ** 40, 0
        for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()):
            if r["kind"] == "skipped":
                scale, finite_in_row = scale / 2, 0
            elif r["kind"] == "train":
                finite_in_row += 1
                if finite_in_row == 3:
                    scale, finite_in_row = scale * 2, 0
            if "loss_scale" in r:
                self.assertEqual(r["loss_scale"], scale, r)
        self.assertLess(steps[-1]["loss"], steps[0]["loss"])
        self.assertNotIn("in a row", done.stderr)  # overflows are not bad steps
        self.assertIn("loss scale", done.stderr)

    def test_fp16_runs_resume_exactly_with_their_loss_scale(self):
        # The scale and its count of finite steps are in the checkpoint: 3 steps + resume + 3
        # repeat 6 steps straight, the scale doubling across the boundary.
        common = ["--precision", "fp16", "--loss-scale", 2 ** 40, "--loss-scale-window", 2, "--dropout", 0.1]
        straight, split = WORK / "fp16-straight", WORK / "fp16-split"
        train(straight, *common, "--max-steps", 6, "--save-every", 6)
        train(split, *common, "--max-steps", 3, "--save-every", 3)
        meta, _ = safetensors_read.load(split / "checkpoint-00000003.safetensors")
        self.assertIn("attn.loss_scale", meta)
        train(split, *common, "--max-steps", 6, "--save-every", 6, "--resume")
        a, b = metrics(straight), metrics(split)
        self.assertEqual([(r["step"], r["loss"], r["grad_norm"], r["loss_scale"], r["overflows"]) for r in a],
                         [(r["step"], r["loss"], r["grad_norm"], r["loss_scale"], r["overflows"]) for r in b])
        self.assertEqual([(r["step"], r["loss_scale"]) for r in metrics(straight, "skipped")],
                         [(r["step"], r["loss_scale"]) for r in metrics(split, "skipped")])
        self.assertGreater(a[-1]["loss_scale"], a[0]["loss_scale"])  # it doubled along the way
        _, left = safetensors_read.load(straight / "checkpoint-00000006.safetensors")
        _, right = safetensors_read.load(split / "checkpoint-00000006.safetensors")
        for name in left:
            self.assertEqual(left[name], right[name], name)

    def test_a_bf16_run_resumes_in_fp32_and_precision_flags_are_checked(self):
        out = WORK / "bf16-then-fp32"
        train(out, "--precision", "bf16", "--max-steps", 2, "--save-every", 2)
        done = train(out, "--precision", "fp32", "--max-steps", 4, "--resume")
        self.assertIn("precision fp32", done.stderr)
        self.assertEqual([r["step"] for r in metrics(out)], [1, 2, 3, 4])
        done = run(["--src", "a", "--tgt", "b", "--precision", "tf32"], expect=2)
        self.assertIn("--precision tf32 applies to --device cuda only", done.stderr)
        done = run(["--src", "a", "--tgt", "b", "--precision", "fp8"], expect=2)
        self.assertIn("--precision", done.stderr)
        help_text = run(["--help"]).stdout
        for flag in ("--precision", "--loss-scale", "--loss-scale-window"):
            self.assertIn(flag, help_text)


class Resume(unittest.TestCase):
    def test_resumed_training_repeats_the_uninterrupted_run_exactly(self):
        # Dropout on: the random stream's state must come back too. 2 000 steps straight beside
        # 1 000 + resume + 1 000, both at once on the two cores.
        common = ["--valid-every", 500, "--save-every", 250, "--keep", 8, "--log-every", 1000]
        straight, split = WORK / "straight", WORK / "split"
        args = lambda out, *more: ([str(TRAIN)] + corpus() + MODEL + ["--batch-tokens", "150", "--threads", "1",
                                                                      "--out", str(out)] + [str(a) for a in common + list(more)])
        env = dict(os.environ, OMP_WAIT_POLICY="passive")
        whole = subprocess.Popen(args(straight, "--max-steps", 2000), env=env, stderr=subprocess.PIPE, text=True)
        run(corpus() + MODEL + ["--batch-tokens", 150, "--threads", 1, "--out", split] + common + ["--max-steps", 1000])
        run(corpus() + MODEL + ["--batch-tokens", 150, "--threads", 1, "--out", split] + common
            + ["--max-steps", 2000, "--resume"])
        _, stderr = whole.communicate(timeout=900)
        self.assertEqual(whole.returncode, 0, stderr[-3000:])

        a, b = metrics(straight), metrics(split)
        self.assertEqual(len(a), len(b))
        self.assertEqual([r["step"] for r in a], list(range(1, 2001)))
        self.assertEqual([r["step"] for r in b], list(range(1, 2001)))
        for x, y in zip(a, b):
            self.assertEqual((x["step"], x["loss"], x["ppl"], x["grad_norm"]), (y["step"], y["loss"], y["ppl"], y["grad_norm"]))
        self.assertEqual([(v["step"], v["loss"]) for v in metrics(straight, "valid")],
                         [(v["step"], v["loss"]) for v in metrics(split, "valid")])
        final = "checkpoint-00002000.safetensors"
        _, left = safetensors_read.load(straight / final)
        _, right = safetensors_read.load(split / final)
        self.assertEqual(left.keys(), right.keys())
        for name in left:  # weights and Adam's moments, bit for bit
            self.assertEqual(left[name], right[name], name)

        # attn-average: the mean of the last three checkpoints, tensor by tensor.
        run(["--run", straight, "--last", 3], program=AVERAGE)
        averaged = model_tensors(straight / "averaged.safetensors")
        parts = [model_tensors(straight / f"checkpoint-0000{s}.safetensors") for s in (1500, 1750, 2000)]
        meta, _ = safetensors_read.load(straight / "averaged.safetensors")
        self.assertEqual(meta["attn.format"], "attn-weights-1")
        self.assertEqual(meta["attn.averaged_from"], "checkpoint-00001500.safetensors,checkpoint-00001750.safetensors,"
                                                     "checkpoint-00002000.safetensors")
        for name, values in averaged.items():
            for i in range(0, len(values), 97):
                mean = sum(p[name][i] for p in parts) / 3
                self.assertAlmostEqual(values[i], mean, delta=1e-6 * max(1, abs(mean)))


class DataParallel(unittest.TestCase):
    def test_two_mpi_processes_equal_one_process_with_both_batches(self):
        mpirun, env = mpi_job(self)
        # Buckets of 50 KiB: the tiny model's gradients (1.9 MB) in many, summed while the
        # backward pass computes the rest (the tape reports each parameter complete).
        steps = ["--max-steps", 4, "--save-every", 4, "--dropout", 0.1, "--bucket-mib", 0.05]
        one = WORK / "one-process"
        train(one, "--accum", 2, *steps)
        two = WORK / "two-processes"
        command = [mpirun, "-np", "2", "--oversubscribe", str(TRAIN)] + corpus() + MODEL + \
                  ["--batch-tokens", "150", "--threads", "1", "--out", str(two)] + [str(a) for a in steps]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertIn("2 process(es) x 1 batch(es) a step", done.stderr)
        found = re.search(r"gradients summed over 2 processes in (\d+) bucket\(s\) of <= 0.05 MiB, (\d+) of them "
                          r"started as the backward pass completed them", done.stderr)
        self.assertIsNotNone(found, done.stderr[-2000:])
        self.assertGreater(int(found.group(1)), 10)
        self.assertEqual(found.group(2), found.group(1))  # every parameter is read through grad::cast
        self.assertEqual(len(metrics(one)), len(metrics(two)))
        for x, y in zip(metrics(one), metrics(two)):
            self.assertEqual(x["tokens"], y["tokens"])
            self.assertAlmostEqual(x["loss"], y["loss"], delta=1e-6 * x["loss"])
        a = model_tensors(one / "checkpoint-00000004.safetensors")
        b = model_tensors(two / "checkpoint-00000004.safetensors")
        self.assertEqual(a.keys(), b.keys())
        for name in a:
            worst = max(abs(x - y) for x, y in zip(a[name], b[name]))
            if name.endswith("key.bias"):
                # A key bias adds the same q·b to every score of a query, which softmax ignores: its
                # true gradient is 0, what is computed is rounding noise, and Adam turns noise of any
                # size into steps of up to the learning rate. Bound it by the rates' sum.
                self.assertLess(worst, sum(r["lr"] for r in metrics(one)) * 1.01, name)
            else:
                self.assertLess(worst, 1e-6, name)


    def test_a_process_killed_mid_run_stops_the_others_and_the_checkpoint_survives(self):
        # One process of two dies (SIGKILL, as the out-of-memory killer would): the other, waiting
        # for it in the gradients' sum, must not hang. mpirun ends the job and names the rank;
        # the last checkpoint, written atomically, resumes. Measured: the job ends 2 s after the kill.
        mpirun, env = mpi_job(self)
        out = WORK / "killed-process"
        command = [mpirun, "-np", "2", "--oversubscribe", str(TRAIN)] + corpus() + MODEL + \
                  ["--batch-tokens", "150", "--threads", "1", "--out", str(out), "--max-steps", "1000000",
                   "--save-every", "10"]
        job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 300
            while not list(out.glob("checkpoint-*.safetensors")):
                self.assertIsNone(job.poll(), "the job ended before its first checkpoint")
                self.assertLess(time.monotonic(), deadline, "no checkpoint after 300 s")
                time.sleep(0.2)
            second = rank_process(1, job.pid)
            self.assertIsNotNone(second, "no process of rank 1 found")
            os.kill(second, signal.SIGKILL)
            killed = time.monotonic()
            output, _ = job.communicate(timeout=60)
            ended = time.monotonic() - killed
        finally:
            if job.poll() is None:
                end_job(job)
                job.wait()
        self.assertNotEqual(job.returncode, 0)
        self.assertLess(ended, 30, f"the job took {ended:.1f} s to end after rank 1 died")
        self.assertRegex(output, r"process rank 1 .*exited on signal 9", output[-2000:])
        print(f"\nrank 1 killed: the job ended {ended:.1f} s later", file=sys.stderr)
        # The newest checkpoint loads and trains on, in one process.
        newest = max(out.glob("checkpoint-*.safetensors"))
        step = int(newest.stem.split("-")[1])
        done = train(out, "--resume", "--max-steps", step + 2)
        self.assertIn(f"resumed from {newest} at step {step}", done.stderr)

    def test_an_mpi_process_takes_stop_signals_on_one_thread_and_saves_when_stopped(self):
        # attn-train takes the signals before MPI starts its threads, so that these block them too
        # and only the signal thread takes them (examples/common/stop_signals.hpp).
        mpirun, env = mpi_job(self)
        out = WORK / "mpi-stopped"
        command = [mpirun, "-np", "1", str(TRAIN)] + corpus() + MODEL + \
            ["--batch-tokens", "150", "--threads", "2", "--out", str(out), "--max-steps", "100000", "--log-every", "5"]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        watchdog = threading.Timer(300, end_job, [process])  # a hang fails this test, not the suite's limit
        watchdog.start()
        try:
            for line in process.stderr:  # wait until it is training
                if line.startswith("step 5/"):
                    break
            else:
                self.fail("the job ended, or was ended after 300 s, before step 5")
            rank = rank_process(0, process.pid)
            self.assertIsNotNone(rank, "no process of rank 0 found")
            stops = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
            blocked = [int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", (task / "status").read_text(), re.M).group(1), 16)
                       for task in Path(f"/proc/{rank}/task").iterdir()]
            taking = [mask for mask in blocked if mask & stops != stops]
            self.assertEqual(len(taking), 1, f"{len(blocked)} threads' masks: {[hex(m) for m in blocked]}")
            self.assertGreater(len(blocked), 3)  # the main, signal, OpenMP and MPI's threads
            os.kill(rank, signal.SIGTERM)
            rest = process.stderr.read()
            self.assertNotEqual(process.wait(timeout=120), 0)  # a process of a job exits with 128 + 15
        finally:
            watchdog.cancel()
            if process.poll() is None:  # a failed check: end the job
                end_job(process)
                process.wait()
            process.stderr.close()
        self.assertIn("(stopped by a signal)", rest)
        self.assertNotIn("attn-train: stopping after this step", rest)  # a job's processes stop silently
        self.assertEqual(len(list(out.glob("checkpoint-*.safetensors"))), 1, rest[-2000:])


class BadInput(unittest.TestCase):
    def write(self, name, text, mode="w"):
        path = WORK / "bad" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode == "wb":
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    def test_help_and_bad_flags(self):
        self.assertIn("--batch-tokens", run(["--help"]).stdout)
        self.assertIn("--last", run(["--help"], program=AVERAGE).stdout)
        done = run(["--src", "a", "--tgt", "b", "--batch-tokens", "lots"], expect=2)
        self.assertIn("--batch-tokens", done.stderr)
        run(["--src", "a"], expect=2)  # --tgt is required
        # Numbers are checked before anything runs: NaN passes a plain range check (every
        # comparison with it is false), an unsigned option would take -1 as 2^64 - 1, and a width
        # of 0 stands for the preset's inside.
        for flag, value, message in (
                ("--dropout", "nan", "--dropout: expected a number from 0 to 0.99, got 'nan'"),
                ("--lr-scale", "0", "--lr-scale: expected a number above 0, got '0'"),
                ("--clip-norm", "nan", "--clip-norm: expected a number, 0 or more, got 'nan'"),
                ("--max-minutes", "inf", "--max-minutes: expected a number, 0 or more, got 'inf'"),
                ("--loss-scale", "nan", "--loss-scale: expected a number from 5.960464477539063e-08 to "
                                        "18446744073709551616, got 'nan'"),
                ("--seed", "-1", "--seed: expected a whole number from 0 to 18446744073709551615, got '-1'"),
                ("--seed", "18446744073709551616", "got '18446744073709551616'"),
                ("--heads", "0", "--heads: Value 0 not in range"),
                ("--d-model", "-128", "--d-model: Value -128 not in range")):
            done = run(["--src", "a", "--tgt", "b", flag, value], expect=2)
            self.assertIn(message, done.stderr)

    def test_a_device_that_is_not_there_is_refused_in_one_line(self):
        done = run(["--src", "a", "--tgt", "b", "--device", "gpu"], expect=2)
        self.assertIn("expected cpu, cuda or cuda:N", done.stderr)
        # No machine has GPU 99: without a CUDA build, a driver or a GPU, the line says which is missing.
        done = run(["--src", "a", "--tgt", "b", "--device", "cuda:99"], expect=2)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertTrue(done.stderr.startswith("attn-train: --device cuda:99: "), done.stderr)
        self.assertRegex(done.stderr, "built without CUDA|no usable CUDA device|no CUDA device|there is no GPU 99")

    def test_attention_path_fused_and_unfused_train_alike_and_additive_cannot_be_fused(self):
        # The same 30 steps through the tiled kernel and through products and a softmax: the same
        # function, so the losses differ by float rounding alone (measured: within 1e-6 relative).
        losses = {}
        for path in ("fused", "unfused"):
            out = WORK / f"path-{path}"
            train(out, "--attention-path", path, "--max-steps", 30, "--valid-every", 30, "--save-every", 30)
            losses[path] = [r["loss"] for r in metrics(out)]
        self.assertEqual([len(losses["fused"]), len(losses["unfused"])], [30, 30])
        worst = max(abs(f / u - 1) for f, u in zip(losses["fused"], losses["unfused"]))
        self.assertLess(worst, 1e-4, losses)
        done = run(["--src", "a", "--tgt", "b", "--attention", "additive", "--attention-path", "fused"], expect=2)
        self.assertIn("--attention-path fused: additive attention", done.stderr)
        done = run(["--src", "a", "--tgt", "b", "--attention-path", "tiled"], expect=2)
        self.assertIn("--attention-path", done.stderr)

    def test_gpus_without_a_gpu_job_are_refused(self):
        done = run(["--src", "a", "--tgt", "b", "--gpus", 2], expect=2)
        self.assertIn("--gpus 2 starts a process per GPU: it needs --device cuda", done.stderr)
        # With --device cuda, a build without CUDA, a machine without a GPU, or a build without
        # NCCL each say so in one line.
        done = run(["--src", "a", "--tgt", "b", "--device", "cuda", "--gpus", 2], expect=2)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertRegex(done.stderr, "built without CUDA|no usable CUDA device|no CUDA device|needs GPUs 0 to 1|"
                                      "needs attn-train built with CUDA and NCCL")

    def test_profile_steps_are_checked_and_need_a_gpu(self):
        for bad in ("20", "0:3", "5:4", "a:b", "3:", ":3", "3:4x"):
            done = run(["--src", "a", "--tgt", "b", "--device", "cpu", "--profile-steps", bad], expect=2)
            self.assertIn(f"--profile-steps expects FROM:TO, two step numbers with 1 <= FROM <= TO (as in 20:22), "
                          f"got '{bad}'", done.stderr)
        done = run(["--src", "a", "--tgt", "b", "--profile-steps", "2:3"], expect=2)
        self.assertIn("--profile-steps marks steps for a GPU profiler: it needs --device cuda", done.stderr)

    def test_widths_that_are_not_compiled_are_named_with_those_that_are(self):
        done = train(WORK / "bad-widths", "--d-model", 384, expect=1)
        self.assertIn("no model is compiled for (d_model 384, d_ff 512, h 4, d_k 32, d_v 32)", done.stderr)
        self.assertIn("tiny (d_model 128, d_ff 512, h 4, d_k 32, d_v 32)", done.stderr)

    def test_line_counts_that_differ_are_named(self):
        src = self.write("three.src", "a\nb\nc\n")
        tgt = self.write("two.tgt", "x\ny\n")
        done = run(["--src", src, "--tgt", tgt, "--out", WORK / "bad-lines"] + MODEL, expect=1)
        self.assertIn(f"'{src}' has 3 lines but '{tgt}' has 2", done.stderr)

    def test_invalid_utf8_is_named_with_file_and_line(self):
        src = self.write("utf8.src", "good\nalso good\n")
        tgt = self.write("utf8.tgt", b"fine\nbad \xff byte\n", mode="wb")
        done = run(["--src", src, "--tgt", tgt, "--out", WORK / "bad-utf8"] + MODEL, expect=1)
        self.assertIn(f"{tgt}:2: invalid UTF-8 at byte 4", done.stderr)

    def test_empty_and_overlong_pairs_are_skipped_and_counted(self):
        lines = [("ka lo mi", "MN CZ BY")] * 50 + [("", "AX")] + [("ka", "")] + [("ka " * 40, "AX")]
        src = self.write("skip.src", "".join(s + "\n" for s, _ in lines))
        tgt = self.write("skip.tgt", "".join(t + "\n" for _, t in lines))
        done = run(["--src", src, "--tgt", tgt, "--out", WORK / "skip", "--max-length", 20, "--max-steps", 1,
                    "--batch-tokens", 150, "--threads", 1, "--config", "tiny", "--layers", 1, "--vocab-size", 20])
        self.assertIn("kept 50 of 53 sentence pairs; skipped 2 empty and 1 longer than 20 subwords (lines 51, 52, 53)",
                      done.stderr)

    def test_a_training_corpus_without_text_is_named(self):
        src = self.write("blank.src", "")  # SentencePiece's trainer failed on an internal check here
        tgt = self.write("blank.tgt", "")
        done = run(["--src", src, "--tgt", tgt, "--out", WORK / "blank", "--max-steps", 1, "--config", "tiny",
                    "--layers", 1, "--vocab-size", 20], expect=1)
        self.assertIn(f"no text in '{src}' and '{tgt}' (empty, or blank lines only)", done.stderr)
        self.assertEqual(len(done.stderr.strip().splitlines()), 2, done.stderr)  # what it trains, then why not

    def test_resume_without_a_checkpoint_or_its_vocabulary(self):
        out = WORK / "no-checkpoint"
        out.mkdir(parents=True, exist_ok=True)
        done = train(out, "--resume", expect=1)
        self.assertIn(f"--resume: no checkpoint-*.safetensors in '{out}'", done.stderr)
        train(out, "--max-steps", 0)  # writes the vocabulary and a step-0 checkpoint
        done = train(out, "--resume", "--max-steps", 0)  # a run already at its last step says so
        self.assertIn("the run is at step 0, --max-steps 0: nothing to train (raise --max-steps)", done.stderr)
        (out / "vocab.model").unlink()
        done = train(out, "--resume", expect=1)
        self.assertIn(f"--resume: '{out / 'vocab.model'}' is missing", done.stderr)

    def test_damaged_or_foreign_checkpoints_are_refused_by_name(self):
        out = WORK / "damaged"
        train(out, "--max-steps", 2, "--save-every", 2)
        checkpoint = out / "checkpoint-00000002.safetensors"
        good = checkpoint.read_bytes()
        # Another model (two layers) may not load it.
        done = train(out, "--resume", "--layers", 2, "--max-steps", 3, expect=1)
        self.assertIn(f"{checkpoint}: written for model.layers = 1, but this run has model.layers = 2", done.stderr)
        # Nor may other batches: the checkpoint's data position indexes its run's batch plan.
        done = train(out, "--resume", "--max-steps", 3, batch_tokens=300, expect=1)
        self.assertIn(f"{checkpoint}: written for data.batch_plan = 219 batches,", done.stderr)
        # Truncated, and one bit flipped in the tensor data: named, never loaded.
        checkpoint.write_bytes(good[: len(good) // 2])
        done = train(out, "--resume", "--max-steps", 3, expect=1)
        self.assertIn(str(checkpoint), done.stderr)
        self.assertIn("truncated", done.stderr)
        flipped = bytearray(good)
        flipped[len(good) - 1000] ^= 0x10
        checkpoint.write_bytes(bytes(flipped))
        done = train(out, "--resume", "--max-steps", 3, expect=1)
        self.assertIn(f"{checkpoint}: checksum mismatch", done.stderr)
        # A run directory that holds checkpoints is not overwritten by a new run.
        checkpoint.write_bytes(good)
        done = train(out, "--max-steps", 3, expect=1)
        self.assertIn("already holds checkpoints: pass --resume", done.stderr)
        train(out, "--resume", "--max-steps", 3)

    def test_non_finite_steps_are_skipped_then_stop_the_run(self):
        out = WORK / "nan-once"
        done = train(out, "--max-steps", 5, "--debug-nan-steps", 3)
        self.assertIn("warning: step 3 skipped: non-finite gradient norm (1 in a row)", done.stderr)
        self.assertEqual([r["step"] for r in metrics(out)], [1, 2, 3, 4, 5])  # the step is taken again
        self.assertEqual(metrics(out, "skipped")[0]["step"], 3)

        out = WORK / "nan-always"
        done = train(out, "--max-steps", 10, "--debug-nan-steps", 3, "--max-bad-steps", 1, expect=3)
        self.assertIn("stopping: 1 step(s) in a row were not finite", done.stderr)
        self.assertTrue((out / "checkpoint-00000002.safetensors").is_file())
        # The checkpoint kept holds finite weights that a resumed run trains on.
        self.assertTrue(all(math.isfinite(v) for t in model_tensors(out / "checkpoint-00000002.safetensors").values()
                            for v in t[:50]))

    def test_a_full_disk_keeps_the_previous_checkpoint(self):
        out = WORK / "full-disk"
        train(out, "--max-steps", 2, "--save-every", 2)
        previous = out / "checkpoint-00000002.safetensors"
        before = previous.read_bytes()

        def small_files():  # every file write past 1 MB fails with EFBIG, as on a full disk
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

        done = train(out, "--resume", "--max-steps", 4, "--save-every", 4, expect=1, preexec_fn=small_files)
        self.assertIn("could not save a checkpoint", done.stderr)
        self.assertIn("File too large", done.stderr)
        self.assertIn(f"the previous checkpoint {previous} is kept", done.stderr)
        # Step 4's save failed at --save-every, and the end of training tried once more, saying so.
        self.assertEqual(done.stderr.count("could not save a checkpoint"), 2)
        self.assertLess(done.stderr.index("could not save"), done.stderr.index("trying once more to save step 4's"))
        self.assertEqual(previous.read_bytes(), before)
        self.assertEqual(sorted(p.name for p in out.glob("checkpoint-*")), [previous.name])

    def test_sigint_saves_a_checkpoint_to_resume_from(self):
        out = WORK / "interrupted"
        command = [str(TRAIN)] + corpus() + MODEL + ["--batch-tokens", "150", "--threads", "1", "--out", str(out),
                                                      "--max-steps", "100000", "--log-every", "20"]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                                   env=dict(os.environ, OMP_WAIT_POLICY="passive"))
        for line in process.stderr:  # wait until it is training
            if line.startswith("step 20/"):
                break
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        process.stderr.close()
        self.assertEqual(process.wait(timeout=120), -signal.SIGINT, rest)  # ended by it, once saved
        self.assertIn("attn-train: stopping after this step, saving a checkpoint (again to stop at once)", rest)
        self.assertIn("(stopped by a signal)", rest)
        saved = sorted(out.glob("checkpoint-*.safetensors"))
        self.assertEqual(len(saved), 1)
        step = int(saved[0].stem.split("-")[1])
        self.assertGreaterEqual(step, 20)
        done = train(out, "--resume", "--max-steps", step + 2)
        self.assertIn(f"resumed from {saved[0]} at step {step}", done.stderr)

    def test_a_stop_while_the_data_is_prepared_ends_the_run_at_once(self):
        # Nothing is trained yet, so nothing is saved: the run ends as the signal comes, not once
        # the vocabulary and the encoding are done (5 s on this corpus here, more on a larger one).
        source, target = WORK / "large.src", WORK / "large.tgt"
        draw = random.Random(0)
        lexicon = ["".join(draw.choices(string.ascii_lowercase, k=draw.randint(2, 9))) for _ in range(20000)]
        for path in (source, target):
            path.write_text("".join(" ".join(draw.choices(lexicon, k=draw.randint(3, 12))) + "\n"
                                    for _ in range(100000)))
        out = WORK / "preparing"
        process = subprocess.Popen([str(TRAIN), "--src", source, "--tgt", target] + ONE_LAYER +
                                   ["--threads", "1", "--out", str(out), "--max-steps", "1"],
                                   stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_WAIT_POLICY="passive"))
        try:
            said = []
            for line in process.stderr:
                said.append(line)
                if line.startswith("training a 8000-subword BPE vocabulary"):
                    break
            process.send_signal(signal.SIGINT)
            said.append(process.stderr.read())
            status = process.wait(timeout=120)
        finally:
            if process.poll() is None:  # a failed check: end it
                process.kill()
                process.wait()
            process.stderr.close()
        said = "".join(said)
        self.assertEqual(status, -signal.SIGINT, said)
        # Neither the encoding's summary nor the stop after preparing ("stopped by a signal
        # before training").
        notice = "attn-train: stopped while preparing the vocabulary and the data: nothing to save\n"
        self.assertTrue(said.endswith(f"BPE vocabulary on {source} and {target}\n{notice}"), said)
        self.assertEqual(list(out.glob("checkpoint-*")), [])
        # A vocabulary the stop left half written does not hold up a new run.
        vocabulary = out / "vocab.model"
        vocabulary.write_bytes(vocabulary.read_bytes()[:100] if vocabulary.exists() else b"half")
        done = train(out, "--max-steps", 2)
        self.assertEqual(len(list(out.glob("checkpoint-*.safetensors"))), 1, done.stderr)

    def test_two_runs_cannot_share_a_directory(self):
        out = WORK / "shared"
        first = subprocess.Popen([str(TRAIN)] + corpus() + MODEL + ["--threads", "1", "--out", str(out),
                                                                    "--max-steps", "100000", "--log-every", "5"],
                                 stderr=subprocess.PIPE, text=True, env=dict(os.environ, OMP_WAIT_POLICY="passive"))
        for line in first.stderr:
            if line.startswith("step 5/"):
                break
        done = train(out, "--max-steps", 3, expect=1)
        first.send_signal(signal.SIGTERM)
        first.stderr.read()
        first.stderr.close()
        self.assertEqual(first.wait(timeout=120), -signal.SIGTERM)
        self.assertIn(f"'{out}' is in use by another attn-train", done.stderr)

    def test_a_wall_clock_budget_ends_with_a_checkpoint(self):
        out = WORK / "budget"
        started = time.monotonic()
        done = train(out, "--max-steps", 1000000, "--max-minutes", 0.05)
        self.assertLess(time.monotonic() - started, 60)
        self.assertIn("(the --max-minutes budget is spent)", done.stderr)
        self.assertEqual(len(list(out.glob("checkpoint-*.safetensors"))), 1)


def main():
    global TRAIN, AVERAGE, WORK
    stop_signals.take_stop_signals()
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    TRAIN, AVERAGE = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    with tempfile.TemporaryDirectory(prefix="attn-trainer-test-") as work:
        WORK = Path(work)
        unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)


if __name__ == "__main__":
    main()
