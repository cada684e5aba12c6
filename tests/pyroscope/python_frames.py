#!/usr/bin/env python3
"""python_frames.py: checks the Python frames of tests/workload/pywork.py as a
real Pyroscope shows them, against fleetprof's own output for the same
pushes.  Prints what it compared; exits 1 when something is wrong.

  python_frames.py stacks FOLDED RENDERED
      FOLDED: the symbolizer's folded files of the run, concatenated (root =
      process name, Python frames QUALNAME_[py]); RENDERED: the flame graph
      read back from Pyroscope (flamebearer.py).  Checks, on RENDERED:
        - the call chains of both threads, caller before callee, frame
          after frame (Model.run;Model.step;Model.inner;Model.leaf, ...);
        - no pywork frame under any other caller than its own: every stack
          that holds Model.leaf holds Model.inner right above it, and so on;
        - every Python function of FOLDED is there, with the same
          inclusive share of the samples as in FOLDED (within 2 points);
        - Model.leaf's share is plausible: most of Model.run's, and the
          model thread, one of two threads that take turns under the GIL,
          holds between a fifth and four fifths of the Python samples.
      Counts may be in another unit (CPU nanoseconds): shares are compared.
      With --drop-unresolved, FOLDED's unresolved frames (MODULE+0xOFFSET)
      are left out first and samples left without frames dropped, as
      Pyroscope does with OTLP Locations that have no Line.

  python_frames.py functions SCRIPT MERGED.json
      MERGED.json: QuerierService/SelectMergeProfile's answer (a pprof
      Profile in JSON).  Every function and method of SCRIPT that the model
      and mixer threads run must be a Function named by its qualified name,
      with SCRIPT as filename and its "def" line as start line, and every
      Line of it must fall inside it (lines from SCRIPT's own ast).  Code
      without a def of its own (a comprehension, QUALNAME.<locals>.<listcomp>)
      must lie inside the function that holds it.
"""
import ast
import json
import re
import sys

SUFFIX = re.compile(r"_\[[a-z]+\]$")
UNRESOLVED = re.compile(r"\+0x[0-9a-f]+$")

# Frame -> its only caller in pywork.py (immediately above it).
CALLERS = {
    "Model.step": "Model.run",
    "Model.inner": "Model.step",
    "Model.leaf": "Model.inner",
    "Mixer.round": "Mixer.run",
    "Mixer.part": "Mixer.round",
    "Mixer.generate": "Mixer.part",
    "Mixer.serialize": "Mixer.part",
    "Mixer.words": "Mixer.part",
    "Mixer.values": "Mixer.generate",
    "shuffle_words": "Mixer.words",
}
CHAINS = [
    "main;Model.run;Model.step;Model.inner;Model.leaf",
    "Mixer.run;Mixer.round;Mixer.part;Mixer.generate;Mixer.values",
    "Mixer.run;Mixer.round;Mixer.part;Mixer.serialize",
    "Mixer.run;Mixer.round;Mixer.part;Mixer.words;shuffle_words",
]


def read_folded(path, drop_root=False, drop_unresolved=False):
    """[(frames, count)] and the set of Python names (_[py] frames)."""
    stacks, py = [], set()
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            frames = stack.split(";")
            if drop_root:
                frames = frames[1:]
            py.update(SUFFIX.sub("", fr) for fr in frames if fr.endswith("_[py]"))
            frames = [SUFFIX.sub("", fr) for fr in frames]
            if drop_unresolved:
                frames = [fr for fr in frames if not UNRESOLVED.search(fr)]
                if not frames:
                    continue
            stacks.append((frames, int(n)))
    return stacks, py


def inclusive(stacks, name):
    return sum(n for frames, n in stacks if name in frames)


def has_chain(frames, chain):
    s = ";" + ";".join(frames) + ";"
    return (";" + chain + ";") in s


def stacks_main(args):
    drop_unresolved = "--drop-unresolved" in args
    args = [a for a in args if a != "--drop-unresolved"]
    want, py = read_folded(args[0], drop_root=True, drop_unresolved=drop_unresolved)
    got, _ = read_folded(args[1])
    tw, tg = sum(n for _, n in want), sum(n for _, n in got)
    bad = []
    if not tw or not tg:
        print("no samples: folded %d, Pyroscope %d" % (tw, tg))
        return 1
    for chain in CHAINS:
        n = sum(c for frames, c in got if has_chain(frames, chain))
        print("chain %s: %.1f%%" % (chain, 100.0 * n / tg))
        if not n:
            bad.append("no stack with the chain %s" % chain)
    for frames, n in got:
        for i, fr in enumerate(frames):
            caller = CALLERS.get(fr)
            if caller and (i == 0 or frames[i - 1] != caller):
                bad.append("%s not under %s: %s" % (fr, caller, ";".join(frames)))
    if not py:
        bad.append("the folded output has no Python frames")
    for name in sorted(py):
        sw, sg = inclusive(want, name) / tw, inclusive(got, name) / tg
        if sg == 0 or abs(sw - sg) > 0.02:
            bad.append("%s: %.1f%% of the samples in Pyroscope, %.1f%% in the folded output"
                       % (name, 100 * sg, 100 * sw))
    py_total = sum(n for frames, n in got if any(fr in py for fr in frames))
    leaf, run = inclusive(got, "Model.leaf"), inclusive(got, "Model.run")
    print("%d Python names; Pyroscope: Model.run %.1f%%, Model.leaf %.1f%% of %d "
          "(folded: %.1f%%, %.1f%% of %d samples); Model.run %.1f%% of those with Python frames"
          % (len(py), 100.0 * run / tg, 100.0 * leaf / tg, tg,
             100.0 * inclusive(want, "Model.run") / tw, 100.0 * inclusive(want, "Model.leaf") / tw,
             tw, 100.0 * run / max(py_total, 1)))
    if not run or leaf < 0.7 * run:
        bad.append("Model.leaf is not most of Model.run: %d of %d" % (leaf, run))
    if not 0.2 <= run / max(py_total, 1) <= 0.8:
        bad.append("Model.run holds %d of %d samples with Python frames" % (run, py_total))
    for b in bad[:20]:
        print(b)
    if len(bad) > 20:
        print("... %d more" % (len(bad) - 20))
    return 1 if bad else 0


def script_functions(path):
    """{qualname: (def line, last line)} of the script's functions."""
    out = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + child.name
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out[q] = (first, child.end_lineno)
                walk(child, q + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    with open(path) as f:
        text = f.read()
    out["<module>"] = (1, max(1, len(text.splitlines())))
    walk(ast.parse(text, path), "")
    return out


def lookup(defs, name):
    """(first, last, exact) for a qualname of the script, or None: a name
    like f.<locals>.<listcomp> gets the range of f."""
    if name in defs:
        return defs[name] + (True,)
    while ".<locals>." in name:
        name = name.rsplit(".<locals>.", 1)[0]
        if name in defs:
            return defs[name] + (False,)
    return None


def functions_main(args):
    script, merged = args
    defs = script_functions(script)
    with open(merged) as f:
        prof = json.load(f)
    st = prof.get("stringTable", [])
    s = lambda i: st[int(i or 0)]
    funcs = {f["id"]: f for f in prof.get("function", [])}
    bad, seen = [], {}
    for fn in funcs.values():
        name = s(fn.get("name"))
        if s(fn.get("filename")) != script:
            continue
        d = lookup(defs, name)
        if d is None:
            bad.append("function %s of %s: no such function in the script" % (name, script))
            continue
        seen[name] = fn
        start = int(fn.get("startLine", 0))
        if start != d[0] if d[2] else not d[0] <= start <= d[1]:
            bad.append("%s: start line %d, def at %d-%d" % (name, start, d[0], d[1]))
    lines = {}
    for loc in prof.get("location", []):
        for ln in loc.get("line", []):
            fn = funcs.get(ln.get("functionId"))
            if fn is None or s(fn.get("filename")) != script:
                continue
            name, line = s(fn.get("name")), int(ln.get("line", 0))
            lines.setdefault(name, set()).add(line)
            lo, hi, _ = lookup(defs, name) or (0, 0, 0)
            if not lo <= line <= hi:
                bad.append("%s: line %d outside it (%d-%d)" % (name, line, lo, hi))
    for name in ["Model.run", "Model.step", "Model.inner", "Model.leaf", "Mixer.run",
                 "Mixer.round", "Mixer.part", "Mixer.generate", "Mixer.values",
                 "Mixer.serialize", "Mixer.words", "shuffle_words"]:
        if name not in seen:
            bad.append("no Function %s with filename %s" % (name, script))
    print("%d functions of %s, %d lines; Model.leaf at lines %s"
          % (len(seen), script, sum(len(v) for v in lines.values()),
             sorted(lines.get("Model.leaf", ()))))
    for b in bad[:20]:
        print(b)
    return 1 if bad else 0


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("stacks", "functions"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "stacks":
        return stacks_main(sys.argv[2:])
    return functions_main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
