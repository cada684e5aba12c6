#!/usr/bin/env python3
"""offcpu_compare.py: fleetprof's off-CPU time against offcputime's
(libbpf-tools), run at the same time on the same process.

usage: offcpu_compare.py [--process NAME] OFFCPU_FOLDED OFFCPUTIME_OUTPUT [CHECK...]

OFFCPU_FOLDED is `fleetprof record --off-cpu --by-thread`'s offcpu.folded
(process;thread;frames... NANOSECONDS), of process NAME only when given;
OFFCPUTIME_OUTPUT is offcputime's text (frames, "- comm (tid)",
microseconds).  Prints the time per thread
and per kernel function asked for, then one line per check, and exits 1
if one fails:
  total        fleetprof's total within 10% of offcputime's;
  share        each thread's share of the total within 5 points;
  KFUNC        the share of the time in stacks with kernel function KFUNC
               (a|b: either) within 5 points of offcputime's;
  KFUNC=UFUNC  at least 90% of fleetprof's time in stacks with KFUNC has
               user function UFUNC in them too (whole user stacks;
               offcputime walks by frame pointer, which this code lacks;
               each stack taken stands for many waits, so a few cut ones
               move the share: 98% here, 93.9% once in CI).
"""
import sys
from collections import defaultdict


def has(frames, names):
    return any(n in frames for n in names.split("|"))


def fleetprof_stacks(path, process):
    out = []
    for line in open(path):
        stack, _, ns = line.rstrip("\n").rpartition(" ")
        frames = stack.split(";")
        if len(frames) < 2 or (process and frames[0] != process):
            continue
        kernel = {f[:-4] for f in frames[2:] if f.endswith("_[k]")}
        user = set(frames[2:])
        out.append((frames[1], kernel, user, int(ns)))
    return out


def offcputime_stacks(path):
    out, frames = [], []
    comm = None
    for line in open(path):
        s = line.strip()
        if not s:
            frames, comm = [], None
        elif s.startswith("- "):
            comm = s[2:].rsplit("(", 1)[0].strip()
        elif comm is not None and s.isdigit():
            out.append((comm, set(frames), set(), int(s) * 1000))
        else:
            frames.append(s)
    return out


def main():
    argv, process = sys.argv[1:], None
    if argv[:1] == ["--process"]:
        process, argv = argv[1], argv[2:]
    ours = fleetprof_stacks(argv[0], process)
    theirs = offcputime_stacks(argv[1])
    t_ours = sum(s[3] for s in ours)
    t_theirs = sum(s[3] for s in theirs)
    failed = 0

    def per_thread(stacks):
        d = defaultdict(int)
        for s in stacks:
            d[s[0]] += s[3]
        return d

    a_t, b_t = per_thread(ours), per_thread(theirs)
    print(f"{'thread / kernel function':28} {'fleetprof s':>12} {'share':>6} "
          f"{'offcputime s':>13} {'share':>6}")

    def row(name, a, b, kind):
        nonlocal failed
        sa = 100 * a / t_ours if t_ours else 0
        sb = 100 * b / t_theirs if t_theirs else 0
        ok = abs(sa - sb) <= 5
        print(f"{name:28} {a / 1e9:12.3f} {sa:5.1f}% {b / 1e9:13.3f} {sb:5.1f}%"
              f"{'' if ok else '  FAIL (' + kind + ')'}")
        failed |= not ok

    for name in sorted(set(a_t) | set(b_t)):
        row(name, a_t.get(name, 0), b_t.get(name, 0), "share")
    for want in argv[2:]:
        if "=" in want:
            continue
        a = sum(s[3] for s in ours if has(s[1], want))
        b = sum(s[3] for s in theirs if has(s[1], want))
        row(want, a, b, "kernel function")
    ratio = t_ours / t_theirs if t_theirs else 0
    ok = 0.9 <= ratio <= 1.1
    print(f"total: {t_ours / 1e9:.3f} s against {t_theirs / 1e9:.3f} s, "
          f"ratio {ratio:.3f}: {'ok' if ok else 'FAIL'}")
    failed |= not ok
    for want in argv[2:]:
        if "=" not in want:
            continue
        kfunc, ufunc = want.split("=", 1)
        in_k = [s for s in ours if has(s[1], kfunc)]
        k = sum(s[3] for s in in_k)
        u = sum(s[3] for s in in_k if ufunc in s[2])
        share = u / k if k else 0
        ok = share >= 0.90
        print(f"{ufunc} in {kfunc}'s stacks: {100 * share:.1f}% of {k / 1e9:.3f} s: "
              f"{'ok' if ok else 'FAIL'}")
        failed |= not ok
    return failed


if __name__ == "__main__":
    sys.exit(main())
