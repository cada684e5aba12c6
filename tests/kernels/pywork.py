# pywork.py [READY]: the kernel matrix's Python workload
# (tests/e2e/kernels_test.sh), run by the host's python3.11 with -S -I.
# Nearly all its time is spent in inner, called by outer: the profile
# should show <module>_[py];outer_[py];inner_[py].  Once in its loop it
# creates the file READY, so that profiling starts after its start-up.
# No imports but built-in modules: the initramfs has only the standard
# library files start-up needs.
import sys


def inner():
    x = 0
    for i in range(20000):
        x += i * i
    return x


def outer():
    inner()
    if len(sys.argv) > 1:
        open(sys.argv[1], "w").close()
    while True:
        inner()


outer()
