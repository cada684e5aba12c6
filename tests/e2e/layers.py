#!/usr/bin/env python3
"""layers.py [--src DIR] [--obj DIR] [--edge A B]...: check that the
folders of the tree depend on each other in one direction, and that no two
modules call each other; print one line per breach and exit 1 if there is
any, or if an exception listed in KNOWN no longer happens (remove it).

A module (x.c) depends on another (y.c) when x.o uses a symbol y.o
defines (nm on the objects of the build, OBJ/), or when x.c or x.h
includes y.h (sources under SRC/; headers are found by their base name, as
the compiler finds them on the Makefile's -I list).  A folder depends on
the folders of the modules its modules depend on.

The rules:
  - a folder depends only on folders of a lower rank (RANK): the
    symbolizer's folders in the order of their calls, elf under symbols
    under profile under sinks under ingest; the programs on top;
  - device/ and symbolizer/ never depend on each other;
  - modules form no cycle of calls (a strongly connected set of several
    modules, by symbols), inside a folder too.

--edge A B adds a dependency of module A on module B (e.g.
symbolizer/profile/pprof symbolizer/sinks/files), so that a test can show
what a breach looks like.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

# Lower rank: depended upon.  Folders of one rank may not depend on each
# other at all.
RANK = {
    "bpf": 0,
    "common": 1,
    "device": 2,
    "symbolizer/elf": 2,
    "symbolizer/symbols": 3,
    "symbolizer/profile": 4,
    "symbolizer/sinks": 5,
    "symbolizer/ingest": 6,
    "symbolizer/service": 7,
    "symbolizer": 8,  # main.c
    "tools": 9,
}
SIDES = ("device", "symbolizer")

# Breaches known today, each with the work that removes it.  A breach
# listed here is reported but does not fail; one listed that no longer
# happens fails, so that the list only shrinks.  None is known today.
KNOWN = {}

DIRS = ["bpf", "common", "device", "tools", "symbolizer"] + [
    "symbolizer/" + d for d in ("elf", "symbols", "profile", "sinks", "ingest", "service")
]


def modules(src):
    """Module name (folder/base) -> its source files (.c, .h)."""
    mods = collections.defaultdict(list)
    for d in DIRS:
        path = os.path.join(src, d)
        for f in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            base, ext = os.path.splitext(f)
            if ext in (".c", ".h") and not base.endswith(".bpf"):
                mods[d + "/" + base].append(os.path.join(path, f))
    return mods


def include_edges(src, mods):
    headers = {}
    for m, files in mods.items():
        for f in files:
            if f.endswith(".h"):
                headers.setdefault(os.path.basename(f), m)
    edges = set()
    for m, files in mods.items():
        for f in files:
            with open(f, encoding="utf-8", errors="replace") as fh:
                for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', fh.read(), re.M):
                    t = headers.get(os.path.basename(inc))
                    if t and t != m:
                        edges.add((m, t))
    return edges


def symbol_edges(obj):
    defined, used = {}, collections.defaultdict(set)
    for d in DIRS:
        path = os.path.join(obj, d)
        for f in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            if not f.endswith(".o"):
                continue
            m = d + "/" + f[:-2]
            out = subprocess.run(["nm", os.path.join(path, f)], capture_output=True, text=True,
                                 check=True).stdout
            for line in out.splitlines():
                p = line.split()
                if len(p) == 2 and p[0] == "U":
                    used[m].add(p[1])
                elif len(p) == 3 and p[1] in "TDBRCV":
                    defined.setdefault(p[2], m)
    return {(m, defined[s]) for m, syms in used.items() for s in syms
            if s in defined and defined[s] != m}


def cycles(edges):
    """Strongly connected sets of more than one module (Tarjan)."""
    graph = collections.defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def breaches(edges, calls):
    """edges: every dependency; calls: those by symbols, the only ones
    that make a cycle of modules (a header that declares a type both
    modules use is no call)."""
    found = {}
    for a, b in sorted(edges):
        fa, fb = os.path.dirname(a), os.path.dirname(b)
        if fa == fb:
            continue
        side_a, side_b = fa.split("/")[0], fb.split("/")[0]
        if side_a in SIDES and side_b in SIDES and side_a != side_b:
            found.setdefault("folder %s -> %s" % (fa, fb), []).append("%s -> %s" % (a, b))
        elif RANK.get(fa, 99) <= RANK.get(fb, 99):
            found.setdefault("folder %s -> %s" % (fa, fb), []).append("%s -> %s" % (a, b))
    for comp in cycles(calls):
        found["cycle " + " ".join(comp)] = [
            "%s -> %s" % e for e in sorted(calls) if e[0] in comp and e[1] in comp]
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=".")
    ap.add_argument("--obj", default=os.path.join(os.environ.get("BUILD", "build"), "obj"))
    ap.add_argument("--edge", nargs=2, action="append", default=[], metavar=("A", "B"))
    args = ap.parse_args()

    mods = modules(args.src)
    if not mods:
        print("layers.py: no sources under %s" % args.src)
        return 1
    sym = symbol_edges(args.obj)
    if not sym:
        print("layers.py: no objects under %s (build first)" % args.obj)
        return 1
    extra = {tuple(e) for e in args.edge}
    edges = include_edges(args.src, mods) | sym | extra
    found = breaches(edges, sym | extra)
    bad = 0
    for key, why in sorted(found.items()):
        if key in KNOWN:
            print("known: %s (%s)" % (key, KNOWN[key]))
        else:
            print("breach: %s: %s" % (key, "; ".join(why)))
            bad = 1
    for key in sorted(set(KNOWN) - set(found)):
        print("fixed: %s: remove it from KNOWN" % key)
        bad = 1
    print("%d modules, %d dependencies, %d breaches (%d known)" %
          (len(mods), len(edges), len(found), len(set(found) & set(KNOWN))))
    return bad


if __name__ == "__main__":
    sys.exit(main())
