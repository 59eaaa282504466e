#!/usr/bin/env python3
"""A toy parallel corpus for the trainer's tests: a tiny "language" translated word by word
through a fixed dictionary, with the sentence reversed. Learnable in a few hundred steps by a
small Transformer, but only through attention (the order changes), not by copying."""

import argparse
import random
from pathlib import Path

SOURCE_WORDS = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "tu", "vo", "ze", "bi", "da", "fo", "gu", "ha", "je"]
TARGET_WORDS = ["AX", "BY", "CZ", "DW", "EV", "FU", "GT", "HS", "IR", "JQ", "KP", "LO", "MN", "NM", "OL", "PK"]


def pair(rng, shortest, longest):
    words = [rng.randrange(len(SOURCE_WORDS)) for _ in range(rng.randint(shortest, longest))]
    source = " ".join(SOURCE_WORDS[w] for w in words)
    target = " ".join(TARGET_WORDS[w] for w in reversed(words))
    return source, target


def write(directory, name, count, seed, shortest=3, longest=8, aligned=True):
    """Writes NAME.src and NAME.tgt. With aligned=False the targets are rotated by a random
    offset, so each belongs to another source line: what a model learns from that is what a
    model that cannot see the source learns, the control the learning tests' thresholds are
    checked against (tests/learning_spread.py)."""
    rng = random.Random(seed)
    pairs = [pair(rng, shortest, longest) for _ in range(count)]
    if not aligned:
        offset = rng.randrange(1, count) if count > 1 else 0
        pairs = [(source, pairs[(i + offset) % count][1]) for i, (source, _) in enumerate(pairs)]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.src").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (directory / f"{name}.tgt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="directory for train.src/tgt and valid.src/tgt")
    parser.add_argument("--train", type=int, default=2000, help="training pairs")
    parser.add_argument("--valid", type=int, default=200, help="validation pairs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shortest", type=int, default=3, help="fewest words in a sentence (default 3)")
    parser.add_argument("--longest", type=int, default=8,
                        help="most words in a sentence (default 8; a benchmark of attention wants more)")
    args = parser.parse_args()
    if not 1 <= args.shortest <= args.longest:
        parser.error(f"need 1 <= --shortest <= --longest, got {args.shortest} and {args.longest}")
    write(args.out, "train", args.train, args.seed, args.shortest, args.longest)
    write(args.out, "valid", args.valid, args.seed + 1, args.shortest, args.longest)


if __name__ == "__main__":
    main()
