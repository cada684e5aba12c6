#!/usr/bin/env python3
"""root_share.py: the share of a process's samples whose stacks are whole.

usage: root_share.py OUT_DIR FIRST[-LAST] PROCESS [ROOT,...]

Reads the symbolizer's per-interval folded files (OUT_DIR/HOST/STAMP-SEQ
.folded, in interval order) from the FIRST-th on (1 is the first; to the
LAST-th when given), keeps
the lines of PROCESS (the first element of a line), and prints
"PERCENT SAMPLES": the sample-weighted share of them whose outermost frame
(the first after the process name, inlined "_[i]" frames skipped) is one
of ROOTS (default: _start, and clone3 under its glibc names), and how
many samples there were.  A stack cut short (a leaf in libc, start_thread
without clone3, an unknown frame) does not count; a stack with no user
frame at all does not either.  Exits 0 (the caller judges the share).
"""
import glob
import os
import re
import sys

DEFAULT_ROOTS = ("_start", "clone3", "__clone3", "__GI___clone3")


def seq(path):
    m = re.search(r"-(\d+)\.folded$", path)
    return int(m.group(1)) if m else 0


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, span, process = sys.argv[1], sys.argv[2].split("-"), sys.argv[3]
    first, last = int(span[0]), int(span[1]) if len(span) > 1 else None
    roots = set(sys.argv[4].split(",")) if len(sys.argv) > 4 else set(DEFAULT_ROOTS)
    files = sorted(glob.glob(os.path.join(out, "*", "*.folded")), key=seq)
    total = whole = 0
    for path in files[first - 1:last]:
        for line in open(path, errors="replace"):
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = [f for f in stack.split(";") if not f.endswith("_[i]")]
            if not frames or frames[0] != process:
                continue
            total += int(n)
            if len(frames) > 1 and frames[1] in roots:
                whole += int(n)
    print(f"{100.0 * whole / total if total else 0.0:.1f} {total}")


if __name__ == "__main__":
    main()
