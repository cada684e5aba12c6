"""pywork.py [SECONDS]: a pure-Python CPU workload for CPython 3.9 to 3.13.

Runs until killed, or for SECONDS.  Two threads run Python code at once
(the GIL lets one run at a time: each has a third to a half of the
process's CPU time, as the host's load moves the hand-overs):

  main thread, "model"  Model.run -> Model.step -> Model.inner -> Model.leaf
                        (arithmetic in the leaf)
  thread "mixer"        Mixer.run -> Mixer.round, then in turn
                          Mixer.generate -> Mixer.values (a generator)
                          Mixer.serialize -> json.dumps / json.loads
                            (the C extension _json, on a medium object)
                          Mixer.words -> shuffle_words

Each part of a mixer round is called a fixed number of times, so the
shares within the mixer depend on the interpreter's speed; the test
compares two profilers on the same process, not fixed shares.  Names are qualified names from 3.11 on
(Model.step); 3.9 names code objects without their class (step).  Each
thread names itself for the kernel (prctl PR_SET_NAME) so that a profile by
thread shows "model" and "mixer".  "pywork: ready" is printed once the
mixer runs.
"""
import json
import sys
import threading
import time

# Calls of each part per mixer round.
ROUND_CALLS = (("generate", 1), ("serialize", 3), ("words", 2))


def name_thread(name):
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


class Model:
    def __init__(self):
        self.state = [1.0] * 64
        self.steps = 0

    def leaf(self, k):
        acc = 0
        for i in range(200):
            acc = (acc + i * k) % 1000003
        return acc

    def inner(self, k):
        total = 0
        for j in range(4):
            total += self.leaf(k + j)
        return total

    def step(self):
        s = 0
        for k in range(8):
            s += self.inner(k)
        self.state[self.steps % 64] = s
        self.steps += 1
        return s

    def run(self, end):
        name_thread("model")
        while end is None or time.monotonic() < end:
            self.step()


def shuffle_words(words, rounds):
    out = words
    for r in range(rounds):
        out = [w[r % len(w):] + w[:r % len(w)] for w in out]
        out.sort()
    return len("".join(out))


class Mixer:
    def __init__(self):
        self.doc = {
            "hosts": [
                {
                    "name": "switch-%03d" % i,
                    "ports": list(range(i % 7, i % 7 + 24)),
                    "up": i % 3 != 0,
                    "load": i * 0.37,
                    "tags": {"rack": "r%d" % (i // 8), "role": "leaf" if i % 2 else "spine"},
                }
                for i in range(60)
            ]
        }
        self.vocab = ["interface", "ethernet", "vlan", "portchannel", "loopback",
                      "mgmt", "bgp", "neighbor", "route", "prefix"] * 8

    def values(self, n):
        x = 7
        for i in range(n):
            x = (x * 31 + i) & 0xFFFF
            yield x

    def generate(self):
        total = 0
        for v in self.values(4000):
            total += v
        return total

    def serialize(self):
        text = json.dumps(self.doc)
        return len(json.loads(text)["hosts"])

    def words(self):
        return shuffle_words(self.vocab, 30)

    def part(self, which):
        if which == "generate":
            return self.generate()
        if which == "serialize":
            return self.serialize()
        return self.words()

    def round(self):
        # A fixed number of calls of each part: no clock read between
        # them (py-spy, the test's oracle, attributes part of such reads'
        # time to the caller's line in a way a CPU profile does not).
        for which, calls in ROUND_CALLS:
            for _ in range(calls):
                self.part(which)

    def run(self, stop):
        name_thread("mixer")
        while not stop.is_set():
            self.round()


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else None
    mixer = Mixer()
    model = Model()
    stop = threading.Event()
    # The model runs in the main thread: no Python thread sits idle (py-spy
    # counts some idle threads as running on 3.9).
    t = threading.Thread(target=mixer.run, args=(stop,), name="mixer")
    t.daemon = True
    t.start()
    print("pywork: ready", flush=True)
    try:
        model.run(None if seconds is None else time.monotonic() + seconds)
    except KeyboardInterrupt:
        pass
    stop.set()
    t.join(timeout=5)


if __name__ == "__main__":
    main()
