#!/usr/bin/env python3
"""pydaemon.py VARIANT SECONDS [--period S] [--busy S]: a daemon-like
Python process, as on a SONiC switch (xcvrd, ledd, psud...): it sleeps,
wakes every --period seconds and does --busy seconds of pure-Python work,
then sleeps again (default 0.5 s and 0.035 s: about 7% of a core).

VARIANT (0-9) picks the work, each a different set of functions, so ten
daemons run ten different sets of code objects: config parsing, counters,
a state machine, routes, regexes, checksums, a generator pipeline, tree
walking, sorting records and text reports.  Exits after SECONDS.
"""
import argparse
import collections
import json
import re
import time
import zlib


# 0: a config database: JSON documents in and out, merged per key.
def cfg_merge(base, delta):
    for key, value in delta.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            cfg_merge(base[key], value)
        else:
            base[key] = value
    return base


def cfg_round(i):
    ports = {f"Ethernet{n}": {"admin_status": "up", "mtu": str(9100 - (n + i) % 3),
                              "speed": "100000", "alias": f"etp{n}"} for n in range(0, 128, 4)}
    doc = json.dumps({"PORT": ports, "VERSION": i})
    merged = cfg_merge({"PORT": {}}, json.loads(doc))
    return len(merged["PORT"])


# 1: port counters: rates over a sliding window.
class CounterWindow:
    def __init__(self, size):
        self.samples = collections.deque(maxlen=size)

    def push(self, value):
        self.samples.append(value)

    def rate(self):
        if len(self.samples) < 2:
            return 0.0
        return (self.samples[-1] - self.samples[0]) / (len(self.samples) - 1)


def counters_round(i, windows):
    total = 0.0
    for port, w in enumerate(windows):
        w.push(i * 1000 + port * 7 + (i * port) % 13)
        total += w.rate()
    return total


# 2: a transceiver state machine.
XCVR_NEXT = {"absent": "inserted", "inserted": "reading", "reading": "ready",
             "ready": "ready", "error": "absent"}


class Transceiver:
    def __init__(self, port):
        self.port, self.state, self.reads = port, "absent", 0

    def poll(self, tick):
        if self.state == "ready" and (tick + self.port) % 97 == 0:
            self.state = "error"
        else:
            self.state = XCVR_NEXT[self.state]
        self.reads += self.state == "reading"
        return self.state


def xcvr_round(i, xcvrs):
    return sum(1 for x in xcvrs if x.poll(i) == "ready")


# 3: routes: longest prefix match over a dict of prefixes.
def route_table(n):
    table = {}
    for k in range(n):
        table[(10 << 24 | k << 8, 24)] = f"nh{k % 8}"
        table[(10 << 24 | (k & ~15) << 8, 20)] = f"agg{k % 4}"
    return table


def route_lookup(table, addr):
    for plen in range(32, -1, -1):
        mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
        hop = table.get((addr & mask, plen))
        if hop:
            return hop
    return None


def route_round(i, table):
    return sum(1 for k in range(64) if route_lookup(table, 10 << 24 | ((i + k) % 300) << 8 | k))


# 4: syslog lines through regexes.
LOG_RE = re.compile(r"^(\w{3}) +(\d+) ([\d:]+) (\S+) (\w+)\[(\d+)\]: (.*)$")


def log_line(i, k):
    return f"Mar {1 + k % 28} 12:{k % 60:02d}:{i % 60:02d} sonic swss[{100 + k}]: port Ethernet{k} oper up"


def log_round(i):
    hits = collections.Counter()
    for k in range(150):
        m = LOG_RE.match(log_line(i, k))
        if m:
            hits[m.group(5)] += 1
    return hits["swss"]


# 5: checksums of EEPROM pages, by hand and by zlib.
def fletcher16(data):
    a = b = 0
    for byte in data:
        a = (a + byte) % 255
        b = (b + a) % 255
    return b << 8 | a


def eeprom_round(i):
    page = bytes((i * 31 + k) & 0xFF for k in range(256))
    return fletcher16(page) ^ zlib.crc32(page)


# 6: a generator pipeline over sensor readings.
def sensor_readings(i, n):
    for k in range(n):
        yield (k, 30.0 + ((i * 7 + k * 3) % 50) / 2.0)


def over_threshold(readings, limit):
    for k, temp in readings:
        if temp > limit:
            yield k, temp


def sensor_round(i):
    return sum(temp for _, temp in over_threshold(sensor_readings(i, 400), 45.0))


# 7: a device tree: recursive walk of nested nodes.
def make_tree(depth, fanout):
    if depth == 0:
        return {"leaf": True, "value": fanout}
    return {"children": [make_tree(depth - 1, fanout) for _ in range(fanout)]}


def tree_sum(node):
    if node.get("leaf"):
        return node["value"]
    return sum(tree_sum(c) for c in node["children"])


def tree_round(i, tree):
    return tree_sum(tree) + i


# 8: neighbor records sorted by several keys.
def neighbor_records(i):
    return [{"ip": f"10.0.{k % 16}.{(k * 7 + i) % 250}", "mac": f"00:11:22:33:{k % 256:02x}:{i % 256:02x}",
             "age": (k * 13 + i) % 300} for k in range(200)]


def neighbor_round(i):
    recs = neighbor_records(i)
    recs.sort(key=lambda r: (r["age"], r["ip"]))
    return recs[0]["age"]


# 9: text reports, as `show` commands print them.
def report_row(cells, widths):
    return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))


def report_round(i):
    rows = [(f"Ethernet{k}", "up" if (k + i) % 5 else "down", k * 100, f"{(k * i) % 97}%")
            for k in range(60)]
    widths = [max(len(str(r[c])) for r in rows) for c in range(4)]
    return len("\n".join(report_row(r, widths) for r in rows))


def make_work(variant):
    if variant == 1:
        windows = [CounterWindow(10) for _ in range(64)]
        return lambda i: counters_round(i, windows)
    if variant == 2:
        xcvrs = [Transceiver(p) for p in range(64)]
        return lambda i: xcvr_round(i, xcvrs)
    if variant == 3:
        table = route_table(300)
        return lambda i: route_round(i, table)
    if variant == 7:
        tree = make_tree(5, 4)
        return lambda i: tree_round(i, tree)
    return {0: cfg_round, 4: log_round, 5: eeprom_round, 6: sensor_round,
            8: neighbor_round, 9: report_round}[variant]


def wake(work, busy, tick):
    """One wake-up: rounds of work for busy seconds of CPU."""
    end = time.thread_time() + busy
    n = 0
    while time.thread_time() < end:
        work(tick * 1000 + n)
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", type=int, choices=range(10))
    ap.add_argument("seconds", type=float)
    ap.add_argument("--period", type=float, default=0.5)
    ap.add_argument("--busy", type=float, default=0.035)
    args = ap.parse_args()
    work = make_work(args.variant)
    stop = time.monotonic() + args.seconds
    tick = 0
    while time.monotonic() < stop:
        wake(work, args.busy, tick)
        tick += 1
        time.sleep(args.period)


if __name__ == "__main__":
    main()
