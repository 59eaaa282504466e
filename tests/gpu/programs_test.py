#!/usr/bin/env python3
"""attn-train and attn-translate with --device cuda against --device cpu (suite gpu; SKIP, exit 77,
without a GPU): a tiny model trained on the GPU learns the toy corpus as on the CPU; the same
first steps give the same losses on both devices to rounding (--precision fp32); a GPU checkpoint
resumes on the CPU and a CPU one on the GPU; greedy and beam translations of the trained model are
identical on both devices; bf16 (the GPU's default), fp16 and tf32 runs on the GPU follow the fp32
run as the CPU's 16-bit runs do (tests/train/trainer_test.py's bounds); --gpus 1 (a supervised worker summing
through NCCL) repeats the plain run's losses.

Usage: programs_test.py ATTN_TRAIN ATTN_TRANSLATE GPU_DEVICE_QUERY"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "train"))
import toy_corpus  # noqa: E402
from trainer_test import following  # noqa: E402  (reads metrics.jsonl: no program needed)

TRAIN = TRANSLATE = None
WORK = None
# The learning test's model and recipe (tests/train/trainer_test.py), whose thresholds hold here.
MODEL = ["--config", "tiny", "--layers", 1, "--vocab-size", 128, "--batch-tokens", 600, "--dropout", 0,
         "--threads", 2, "--log-every", 100]


def run(program, args, expect=0):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    done = subprocess.run([str(program)] + [str(a) for a in args], capture_output=True, text=True, env=env,
                          timeout=900)
    if done.returncode != expect:
        raise AssertionError(f"exit status {done.returncode}, expected {expect}\n--- args: {args}\n"
                             f"--- stderr:\n{done.stderr[-4000:]}")
    return done


def corpus():
    data = WORK / "toy"
    return ["--src", data / "train.src", "--tgt", data / "train.tgt", "--valid-src", data / "valid.src",
            "--valid-tgt", data / "valid.tgt"]


def metrics(out, kind="train"):
    lines = (Path(out) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def train(out, device, *extra):
    return run(TRAIN, corpus() + MODEL + ["--device", device, "--out", out] + list(extra))


class GpuPrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Both devices train the learning test's run (tests/train/trainer_test.py), 400 steps.
        cls.gpu = WORK / "gpu"
        cls.cpu = WORK / "cpu"
        # fp32 on the GPU too (its default is bf16), so that the numbers compare.
        for out, device in ((cls.gpu, "cuda"), (cls.cpu, "cpu")):
            train(out, device, "--max-steps", 400, "--valid-every", 200, "--save-every", 200, "--precision", "fp32")

    def test_the_same_steps_give_the_same_losses_to_rounding(self):
        gpu, cpu = metrics(self.gpu), metrics(self.cpu)
        self.assertEqual(([r["step"] for r in gpu], [r["step"] for r in cpu]), (list(range(1, 401)),) * 2)
        for g, c in zip(gpu[:20], cpu[:20]):  # before rounding differences grow through training
            self.assertAlmostEqual(g["loss"], c["loss"], delta=1e-3 * c["loss"], msg=f"step {g['step']}")
        self.assertTrue(all(r.get("peak_device_mib", 0) > 0 for r in gpu), "peak device memory is logged")

    def test_a_tiny_model_trained_on_the_gpu_learns_the_toy_corpus(self):
        valid = metrics(self.gpu, "valid")
        # The CPU learning test's thresholds: it measured perplexity 1.22-1.63 after 400 steps, and
        # 17.7-18.3 for a model that cannot use the source (docs/testing.md).
        self.assertLess(valid[-1]["loss"], 2.0, valid)
        self.assertLess(valid[-1]["ppl"], 4.0, valid)
        cpu_valid = metrics(self.cpu, "valid")
        self.assertLess(abs(valid[-1]["ppl"] - cpu_valid[-1]["ppl"]), 0.25 * cpu_valid[-1]["ppl"])

    def test_checkpoints_resume_on_the_other_device(self):
        for source, device in ((self.gpu, "cpu"), (self.cpu, "cuda")):
            out = WORK / f"resume-{device}"
            subprocess.run(["cp", "-r", str(source), str(out)], check=True)
            train(out, device, "--max-steps", 410, "--resume", "--valid-every", 1000, "--save-every", 1000)
            records = metrics(out)
            self.assertEqual([r["step"] for r in records[-10:]], list(range(401, 411)))
            before = records[-11]["loss"]  # step 400, the other device's
            for r in records[-10:]:  # training goes on where it was, on the other device
                self.assertLess(abs(r["loss"] - before), 0.5 * before + 0.2, f"{device}: {r}")

    def test_bf16_fp16_and_tf32_on_the_gpu_follow_the_fp32_run(self):
        # tf32: float32 with the float products on tensor cores, their inputs rounded to 10 bits.
        for precision in ("bf16", "fp16", "tf32"):
            out = WORK / f"gpu-{precision}"
            done = train(out, "cuda", "--max-steps", 400, "--valid-every", 200, "--save-every", 400,
                         "--precision", precision)
            self.assertIn(f"precision {precision}", done.stderr)
            early, windows = following(self.gpu, out)
            valid = metrics(out, "valid")[-1]
            print(f"\nGPU {precision}: steps 1-50 within {100 * early:.3f} %, 100-step windows within "
                  f"{100 * windows:.2f} % of fp32; validation loss {valid['loss']:.4f}", file=sys.stderr)
            self.assertLess(early, 0.01, precision)
            self.assertLess(windows, 0.20, precision)
            self.assertLess(valid["loss"], 2.0, precision)
            self.assertLess(valid["ppl"], 4.0, precision)
            if precision == "fp16":
                self.assertTrue(all(r["loss_scale"] > 0 for r in metrics(out)))

    def test_gpus_1_trains_as_one_plain_process(self):
        # attn-train --gpus 1: a supervisor and one worker summing through NCCL over one process,
        # which must change nothing: the same losses, bit for bit, as the plain GPU run's first steps.
        out = WORK / "gpus-1"
        done = train(out, "cuda", "--gpus", 1, "--max-steps", 20, "--valid-every", 1000, "--save-every", 20,
                     "--precision", "fp32")
        self.assertIn("attn-train: 1 process(es), one on each of GPUs 0 to 0", done.stderr)
        plain = metrics(self.gpu)[:20]
        self.assertEqual([(r["step"], r["loss"]) for r in metrics(out)], [(r["step"], r["loss"]) for r in plain])
        done = run(TRAIN, corpus() + MODEL + ["--device", "cuda", "--gpus", 99, "--out", WORK / "gpus-99"], expect=2)
        self.assertIn("--gpus 99 from cuda:0 needs GPUs 0 to 98", done.stderr)

    def test_profile_steps_change_nothing_without_a_profiler(self):
        # --profile-steps opens and closes a capture range no profiler waits for: the same losses,
        # bit for bit, as the plain GPU run's first steps.
        out = WORK / "profiled"
        train(out, "cuda", "--profile-steps", "3:5", "--max-steps", 8, "--valid-every", 1000, "--save-every", 8,
              "--precision", "fp32")
        plain = metrics(self.gpu)[:8]
        self.assertEqual([(r["step"], r["loss"]) for r in metrics(out)], [(r["step"], r["loss"]) for r in plain])

    def test_translations_are_the_same_on_both_devices(self):
        source = WORK / "toy" / "valid.src"
        for search in (["--greedy"], ["--beam", 4]):
            outputs = []
            for device in ("cuda", "cpu"):
                out = WORK / f"translation-{device}-{len(search)}.txt"
                run(TRANSLATE, ["--run", self.gpu, "--input", source, "--output", out, "--device", device,
                                "--quiet", "--threads", 2] + search)
                outputs.append(out.read_text())
            self.assertEqual(outputs[0], outputs[1], f"{search}: the GPU's and the CPU's translations differ")


if __name__ == "__main__":
    TRAIN, TRANSLATE, query = (Path(a) for a in sys.argv[1:4])
    if subprocess.run([str(query)], capture_output=True).returncode == 77:
        print("no CUDA device: skipping")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="attn-gpu-programs.") as work:
        WORK = Path(work)
        toy_corpus.write(WORK / "toy", "train", 2000, seed=7)
        toy_corpus.write(WORK / "toy", "valid", 100, seed=8)
        unittest.main(argv=sys.argv[:1], verbosity=2)
