"""demo.py: the Python half of the workload `make run` profiles: Python
functions fleetprof names from the interpreter's own frames (_[py])."""
import sys
import time


def demo_python_primes(limit):
    count = 0
    for n in range(2, limit):
        for d in range(2, int(n ** 0.5) + 1):
            if n % d == 0:
                break
        else:
            count += 1
    return count


def demo_python_main(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        demo_python_primes(20000)


if __name__ == "__main__":
    demo_python_main(float(sys.argv[1]) if len(sys.argv) > 1 else 12)
