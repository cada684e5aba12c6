#!/usr/bin/env python3
"""pyfold.py FLEETPROF FILE TABLE DEBUGDIR: for the rows of FILE's unwind table
(TABLE, from `fleetprof symbolize -u`) that the agent folds frames to
(fp_unwind_row_start: those of the SP and FP rules, in any state, as the
agent does with a table of today's compiler, FP_FEATURE_FUNCTION_ROWS), whether
`fleetprof symbolize` names the same function at the row's start as at
addresses inside the row.  Prints "rows N addresses M differ D" and the
first differences; exits 1 if any differ."""
import bisect
import struct
import subprocess
import sys

fleetprof, path, table, debug = sys.argv[1:5]
blob = open(table, "rb").read()
_, _, arch, _, nrows, _ = struct.unpack_from("<4sHBBII", blob, 0)
rows = [struct.unpack_from("<IHBb", blob, 16 + 8 * i) for i in range(nrows)]
loads = []
for line in subprocess.run(["readelf", "-lW", path], capture_output=True,
                           text=True).stdout.splitlines():
    f = line.split()
    if f and f[0] == "LOAD":
        loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))


def vaddr(off):
    for o, v, size in loads:
        if o <= off < o + size:
            return off - o + v
    return None


# Every foldable row, at most 4,000 of them evenly: its start, its middle
# and its last byte.
fold = [i for i in range(nrows - 1) if (rows[i][2] & 15) in (1, 2)]
step = max(1, len(fold) // 4000)
pairs = []
for i in fold[::step]:
    start, end = rows[i][0], rows[i + 1][0]
    for inside in {start + (end - start) // 2, end - 1} - {start}:
        if vaddr(start) is not None and vaddr(inside) is not None:
            pairs.append((vaddr(start), vaddr(inside)))
addrs = [a for p in pairs for a in p]
out = subprocess.run([fleetprof, "symbolize", "-e", path, "--debug-dir", debug],
                     input="".join(f"{a:#x}\n" for a in addrs),
                     capture_output=True, text=True).stdout
# One block per address, inlined frames first: the function is the last.
names = [b.strip().splitlines()[-2] for b in out.strip().split("\n\n")]
if len(names) != len(addrs):
    print(f"symbolize gave {len(names)} answers for {len(addrs)} addresses")
    sys.exit(1)
differ = [(pairs[k], names[2 * k], names[2 * k + 1]) for k in range(len(pairs))
          if names[2 * k] != names[2 * k + 1]]
unknown = sum(n == "??" for n in names)
print(f"rows {len(fold)} (of {nrows}) checked {len(pairs)} pairs, {unknown} addresses "
      f"unnamed, differ {len(differ)}")
for (s, i), a, b in differ[:10]:
    print(f"  {s:#x} {a} / {i:#x} {b}")
sys.exit(1 if differ or unknown == len(names) else 0)
