#!/usr/bin/env python3
"""Compile-fail test harness ("the Eigen way").

A case is one C++ file. It holds the bad code between `#ifdef ATTN_KO` and
`#endif`, and one or more lines

    // expect: <substring of the compiler's diagnostic>

The case passes when
  * the ok half (compiled without -DATTN_KO) compiles, and
  * the ko half (compiled with -DATTN_KO) fails to compile, and the compiler's
    output contains every expected substring.

Meson's plain `should_fail` cannot tell one error from another; this can.

Usage:
    check.py [--expect MSG]... [--timeout S] SOURCE -- COMPILER [FLAGS...]

Everything after `--` is the compiler command and its flags (the project's
compiler, -std, warning flags, include directories, defines); the harness adds
`-fsyntax-only`, the source and, for the ko half, `-DATTN_KO`. `--expect`
replaces the file's `// expect:` lines (the harness's own tests use it).

Exit status: 0 pass, 1 the case failed, 2 the case or the command line is
malformed. Standard library only.
"""

import argparse
import os
import re
import subprocess
import sys

EXPECT_RE = re.compile(r"^\s*//\s*expect:\s*(.*?)\s*$")
KO_MACRO = "ATTN_KO"
MAX_LINES = 80  # of diagnostics shown for a failing half


def read_expectations(source):
    with open(source, encoding="utf-8") as f:
        text = f.read()
    expects = [m.group(1) for line in text.splitlines()
               if (m := EXPECT_RE.match(line)) and m.group(1)]
    return text, expects


def compile_half(command, source, ko, timeout):
    cmd = list(command) + ["-fsyntax-only"]
    if ko:
        cmd.append("-D" + KO_MACRO)
    cmd.append(source)
    # C locale: plain ASCII quotes in diagnostics, so expectations are stable.
    env = dict(os.environ, LC_ALL="C", LANG="C")
    env.pop("GCC_COLORS", None)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return cmd, None, "timed out after %s s" % timeout
    except OSError as e:
        return cmd, None, "could not run the compiler: %s" % e
    return cmd, proc.returncode, proc.stdout.decode("utf-8", errors="replace")


def show(title, cmd, output):
    print("---- %s" % title)
    print("$ " + " ".join(cmd))
    lines = output.rstrip().splitlines()
    for line in lines[:MAX_LINES]:
        print("   " + line)
    if len(lines) > MAX_LINES:
        print("   ... (%d more lines)" % (len(lines) - MAX_LINES))


def main(argv):
    if "--" not in argv:
        print("check.py: missing '-- COMPILER [FLAGS...]'", file=sys.stderr)
        return 2
    split = argv.index("--")
    own, command = argv[:split], argv[split + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source")
    parser.add_argument("--expect", action="append",
                        help="expected diagnostic substring (replaces the file's // expect: lines)")
    parser.add_argument("--timeout", type=float, default=140.0,
                        help="seconds per half (the meson test timeout covers both)")
    args = parser.parse_args(own)
    if not command:
        print("check.py: no compiler given after '--'", file=sys.stderr)
        return 2

    try:
        text, expects = read_expectations(args.source)
    except OSError as e:
        print("check.py: cannot read %s: %s" % (args.source, e), file=sys.stderr)
        return 2
    if args.expect:
        expects = args.expect
    name = os.path.basename(args.source)
    if not expects:
        print("%s: malformed case: no '// expect: <message>' line" % name)
        return 2
    if not re.search(r"#\s*if(def)?\s*\(?\s*(defined\s*\(?\s*)?" + KO_MACRO, text):
        print("%s: malformed case: no '#ifdef %s' block" % (name, KO_MACRO))
        return 2

    print("case:   %s" % os.path.normpath(args.source))
    for e in expects:
        print("expect: %r" % e)

    ok = True

    cmd, rc, out = compile_half(command, args.source, False, args.timeout)
    if rc == 0:
        print("ok half (without -D%s): compiles                         PASS" % KO_MACRO)
    else:
        ok = False
        print("ok half (without -D%s): does not compile                 FAIL" % KO_MACRO)
        show("ok half diagnostics", cmd, out)

    cmd, rc, out = compile_half(command, args.source, True, args.timeout)
    missing = [e for e in expects if e not in out]
    if rc is None:
        ok = False
        print("ko half (with -D%s):    %s FAIL" % (KO_MACRO, out))
    elif rc == 0:
        ok = False
        print("ko half (with -D%s):    compiles, but must not           FAIL" % KO_MACRO)
        show("ko half output", cmd, out)
    elif missing:
        ok = False
        print("ko half (with -D%s):    fails, but the message is missing FAIL" % KO_MACRO)
        for e in missing:
            print("  not found: %r" % e)
        show("ko half diagnostics", cmd, out)
    else:
        print("ko half (with -D%s):    fails with the expected message  PASS" % KO_MACRO)

    print("result: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
