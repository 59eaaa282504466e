"""What the *_vs_torch.py benchmarks share on the parent side: checking the Python that runs the
PyTorch reference, and running one side at a time as a child process. Standard library only."""
import os
import re
import signal
import subprocess
import sys
import time

INSTALL_HINT = "on Debian: apt-get install python3-torch python3-sentencepiece, or pass --python"


def check_python(python, who):
    """Stops with a message when `python` cannot import torch and sentencepiece."""
    probe = subprocess.run([python, "-c", "import torch, sentencepiece"], capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["?"])[-1]
        sys.exit(f"{who}: {python} cannot import torch and sentencepiece ({reason}); {INSTALL_HINT}")


def run_child(who, name, command, env, log_dir):
    """Runs one side to its end, its output in log_dir; stops with the end of its errors when it
    fails. Returns (its own ru_maxrss in KiB, wall seconds, stdout path, stderr path)."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()  # "attn-train (vocabulary)": attn-train-vocabulary
    stdout_path, stderr_path = log_dir / f"{stem}.stdout", log_dir / f"{stem}.stderr"
    print(f"{who}: running {name} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            child = subprocess.Popen([str(c) for c in command], stdout=out, stderr=err, env=env)
        except OSError as e:
            sys.exit(f"{who}: cannot start {command[0]}: {e.strerror}")
        try:
            _, status, usage = os.wait4(child.pid, 0)  # this child's rusage alone
        except KeyboardInterrupt:
            child.send_signal(signal.SIGTERM)
            child.wait()
            raise
        child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        tail = stderr_path.read_text(errors="replace").strip().splitlines()[-15:]
        sys.exit(f"{who}: {name} failed (exit status {child.returncode}); the end of its output:\n  "
                 + "\n  ".join(tail))
    return usage.ru_maxrss, wall, stdout_path, stderr_path
