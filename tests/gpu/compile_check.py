#!/usr/bin/env python3
"""Runs a compiler command that checks code without writing an object (-fsyntax-only for the
host side), and writes STAMP when it succeeds, so that Meson has an output to track.

Usage: compile_check.py STAMP -- COMMAND [ARGS...]
"""

import subprocess
import sys


def main(argv):
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    stamp, command = argv[0], argv[2:]
    status = subprocess.call(command)
    if status == 0:
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(" ".join(command) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
