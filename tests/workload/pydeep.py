"""pydeep.py [SECONDS [DEPTH]]: one thread, DEPTH (default 30) Python frames
of descend() deep, spinning in the innermost one (spin) until killed or for
SECONDS.  For benchmarks of the Python frame walk: every sample of this
process has the same stack, <module> -> main -> descend x DEPTH -> spin, so
a profiler that reports fewer frames lost some.  CPython 3.9 to 3.13.
"""
import sys
import time


def spin(deadline):
    x = 0
    while deadline is None or time.monotonic() < deadline:
        for i in range(20000):
            x = (x + i * i) & 0xFFFFFF
    return x


def descend(n, deadline):
    if n <= 1:
        return spin(deadline)
    return descend(n - 1, deadline) + 1


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else None
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    deadline = time.monotonic() + seconds if seconds is not None else None
    descend(depth, deadline)


if __name__ == "__main__":
    main()
