"""pyreuse.py [SECONDS]: code objects that are freed and whose memory is
reused by others, for the Python test's "never a wrong name" check.

Each round compiles a new function gen_K (K = 0..39) whose hot loop sits
K lines below its def, calls it for a millisecond or two, and drops it, so
that the next round's code object is likely to land where the last one
was.  A frame named gen_K is right only on lines K + 2 to K + 5.
"""
import sys
import time


def make(k):
    src = "def gen_%d(n):\n" % k + "\n" * k + (
        "    x = 0\n"
        "    for j in range(n):\n"
        "        x += j * j\n"
        "    return x\n")
    scope = {}
    exec(compile(src, "<gen>", "exec"), scope)
    return scope["gen_%d" % k]


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    end = time.time() + seconds
    k = 0
    while time.time() < end:
        f = make(k % 40)
        f(20000)
        del f
        k += 1


main()
