#!/usr/bin/env python3
"""flamebearer.py RENDER.json: prints the flame graph of a Pyroscope
/pyroscope/render?format=json answer as folded stacks, one line a stack
("root;caller;...;leaf COUNT", COUNT the self value, in the profile's
unit), so that tests can grep call chains the way they do fleetprof's
profile.folded.

The answer's flamebearer is in the "single" format: levels[d] is a flat list
of groups of four numbers (x offset relative to the previous node's end on
that level, total, self, index into names), levels[d+1] holding the children
of the nodes of levels[d]. A node's parent is the node of the level above
whose [x, x+total) range holds its x. The first level's single node is
Pyroscope's "total", left out of the stacks.
"""
import json
import sys


def folded(render):
    fb = render["flamebearer"]
    fmt = render.get("metadata", {}).get("format", "single")
    if fmt != "single":
        raise SystemExit("flamebearer.py: format %r, expected single" % fmt)
    names = fb["names"]
    prev = []  # (x, total, path) of the level above
    out = {}
    for d, level in enumerate(fb["levels"]):
        cur = []
        x = 0
        for i in range(0, len(level), 4):
            dx, total, self_, name = level[i : i + 4]
            x += dx
            parent = ()
            for px, ptotal, ppath in prev:
                if px <= x < px + ptotal:
                    parent = ppath
                    break
            else:
                if d > 0:
                    raise SystemExit("flamebearer.py: node at level %d x %d has no parent" % (d, x))
            path = parent + (names[name],) if d > 0 else ()
            cur.append((x, total, path))
            if self_ and path:
                key = ";".join(path)
                out[key] = out.get(key, 0) + self_
            x += total
        prev = cur
    return out


def main():
    with open(sys.argv[1]) as f:
        render = json.load(f)
    for stack, n in sorted(folded(render).items()):
        print("%s %d" % (stack, n))


if __name__ == "__main__":
    main()
