"""pywork.py [SECONDS]: a pure-Python CPU workload for CPython 3.9 to 3.13.

Runs until killed, or for SECONDS.  Two threads run Python code at once
(the GIL lets one run at a time, so each has about half of the process's
CPU time):

  thread "model"  Model.run -> Model.step -> Model.inner -> Model.leaf
                  (arithmetic in the leaf)                      ~50 %
  thread "mixer"  Mixer.run -> Mixer.round, then one of
                    Mixer.generate -> Mixer.values (a generator)  ~10 %
                    Mixer.serialize -> json.dumps / json.loads    ~15 %
                      (the C extension _json, on a medium object)
                    Mixer.words -> shuffle_words                  ~25 %

The shares hold whatever the interpreter's speed: each part of a mixer
round runs for its share of the round in the thread's own CPU time.  Names are qualified names from 3.11 on
(Model.step); 3.9 names code objects without their class (step).  Each
thread names itself for the kernel (prctl PR_SET_NAME) so that a profile by
thread shows "model" and "mixer".  "pywork: ready" is printed once both
threads run.
"""
import json
import sys
import threading
import time

# Milliseconds of one mixer round spent in each part.
SHARES_MS = {"generate": 10.0, "serialize": 15.0, "words": 25.0}


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

    def run(self, stop):
        name_thread("model")
        while not stop.is_set():
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
        # Each part runs for its share of the round, in this thread's CPU
        # time (which does not count waits for the GIL), in steps of three
        # calls of about 0.2 to 0.8 ms each.
        for which, ms in SHARES_MS.items():
            t0 = time.thread_time()
            while time.thread_time() - t0 < ms / 1000.0:
                for _ in range(3):
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
    threads = [threading.Thread(target=model.run, args=(stop,), name="model"),
               threading.Thread(target=mixer.run, args=(stop,), name="mixer")]
    for t in threads:
        t.daemon = True
        t.start()
    print("pywork: ready", flush=True)
    try:
        if seconds is None:
            while True:
                time.sleep(3600)
        else:
            time.sleep(seconds)
    except KeyboardInterrupt:
        pass
    stop.set()
    for t in threads:
        t.join(timeout=5)


if __name__ == "__main__":
    main()
