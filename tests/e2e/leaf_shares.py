#!/usr/bin/env python3
"""leaf_shares.py: compare leaf-function shares of fleetprof and perf.

usage: leaf_shares.py PROFILE.folded PERF.script

Leaves fall into buckets: the workload's two user functions, the kernel,
and everything else.  Prints each bucket's share in both and exits 1 if any
differs by more than 10 points (or if either side has too few samples).
"""
import re
import sys

BUCKETS = ("crunch", "mix", "kernel", "other")


def bucket(name, kernel):
    if "Cruncher::crunch" in name:
        return "crunch"
    if "fpwork_mix" in name:
        return "mix"
    return "kernel" if kernel else "other"


def folded_counts(path):
    counts = dict.fromkeys(BUCKETS, 0)
    for line in open(path):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        # perf names the function the code belongs to; inlined frames
        # ("_[i]") stand above it in ours.
        frames = stack.split(";")
        while len(frames) > 1 and frames[-1].endswith("_[i]"):
            frames.pop()
        leaf = frames[-1]
        counts[bucket(leaf, leaf.endswith("_[k]"))] += int(n)
    return counts


def perf_counts(path):
    """perf script -F comm,tid,ip,sym,dso: a header line per sample, then
    its frames leaf first, then a blank line."""
    counts = dict.fromkeys(BUCKETS, 0)
    leaf_next = False
    for line in open(path, errors="replace"):
        if not line.strip():
            leaf_next = False
            continue
        if not line.startswith((" ", "\t")):
            leaf_next = True
            continue
        if leaf_next:
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
            name, dso = (m.group(1), m.group(2)) if m else (line.strip(), "")
            counts[bucket(name, "kernel" in dso or "vmlinux" in dso)] += 1
            leaf_next = False
    return counts


def main():
    ours, perf = folded_counts(sys.argv[1]), perf_counts(sys.argv[2])
    tot_o, tot_p = sum(ours.values()), sum(perf.values())
    print(f"samples: fleetprof {tot_o}, perf {tot_p}")
    if tot_o < 200 or tot_p < 200:
        print("too few samples")
        return 1
    worst = 0.0
    for b in BUCKETS:
        so, sp = 100.0 * ours[b] / tot_o, 100.0 * perf[b] / tot_p
        worst = max(worst, abs(so - sp))
        print(f"{b:8} fleetprof {so:5.1f}%  perf {sp:5.1f}%  diff {abs(so - sp):4.1f}")
    return 0 if worst <= 10.0 else 1


if __name__ == "__main__":
    sys.exit(main())
