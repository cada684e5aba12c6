#!/usr/bin/env python3
"""same_stacks.py [--drop-root] [--drop-unresolved] EXPECTED ACTUAL: checks
that two folded-stack files hold the same stacks with proportional counts,
and prints the differences if not (exit 1).

EXPECTED is fleetprof's profile.folded; ACTUAL is a flame graph read back
from Pyroscope (flamebearer.py). Before comparing, each frame loses
fleetprof's annotation suffix (_[k] kernel, _[i] inlined, ...): the pprof
and OTLP encoders carry those facts in other fields, and Pyroscope keeps
only names. --drop-root removes EXPECTED's first frame, the process name
that fleetprof's folded output puts at the root. --drop-unresolved removes
EXPECTED's frames without symbols (MODULE+0xOFFSET), and the samples left
with no frame at all: fleetprof's OTLP gives such a frame a Location with
its mapping and address but no Line (for a backend to symbolize), and
Pyroscope's OTLP ingestion keeps only Locations with Lines, and no empty
stacks; its pprof names them as a Function. ACTUAL's counts may be
in another unit (CPU nanoseconds for sample counts): they must all be the
same whole multiple of EXPECTED's.
"""
import re
import sys

SUFFIX = re.compile(r"_\[[a-z]+\]$")
UNRESOLVED = re.compile(r"\+0x[0-9a-f]+$")


def read(path, drop_root, drop_unresolved=False):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            frames = [SUFFIX.sub("", fr) for fr in stack.split(";")]
            if drop_root:
                frames = frames[1:]
            if drop_unresolved:
                frames = [fr for fr in frames if not UNRESOLVED.search(fr)]
                if not frames:
                    continue
            key = ";".join(frames)
            out[key] = out.get(key, 0) + int(n)
    return out


def main():
    args = sys.argv[1:]
    drop_root = "--drop-root" in args
    drop_unresolved = "--drop-unresolved" in args
    args = [a for a in args if a not in ("--drop-root", "--drop-unresolved")]
    want, got = read(args[0], drop_root, drop_unresolved), read(args[1], False)
    tw, tg = sum(want.values()), sum(got.values())
    if tw == 0 or tg == 0 or tg % tw:
        print("totals: expected %d, actual %d: not a whole multiple" % (tw, tg))
        return 1
    scale = tg // tw
    bad = 0
    for k in sorted(set(want) | set(got)):
        w, g = want.get(k, 0) * scale, got.get(k, 0)
        if w != g:
            bad += 1
            if bad <= 20:
                print("%s: expected %d, actual %d" % (k, w, g))
    print("%d stacks, %d differ, unit x%d" % (len(want), bad, scale))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
