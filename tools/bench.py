#!/usr/bin/env python3
"""bench.py: fleetprof's footprint, measured side by side with perf in the
same run.  `make bench` runs it as root.

1. 30 s at 99 Hz, the same 2-thread CPU-bound workload, fleetprof-agent
   (shipping to a symbolizer on loopback) next to `perf record -a -g -F 99`:
   process CPU time and peak RSS of each; for the agent, BPF run time per
   sample, BPF map memory and wire bytes per sample.
2. At 999 Hz: the workload's throughput with no profiler, under the agent,
   under perf.
3. Unwinding code without frame pointers: a 30-frame stack (gcc -O2)
   under the agent, `perf record --call-graph dwarf` and `perf record -g`
   at once: BPF time per sample, agent memory and maps, wire bytes, how
   many intervals until stacks are whole; table size and compile time for
   libc and python3.
3b. Kernel-mode samples (--only kernel): redis-server under
   redis-benchmark next to deep (gcc -O2, user mode), one agent -p each
   at 99 Hz, a third on redis-server with --user-stacks-only, a fourth on
   an idle process (the filter's cost on other processes' ticks, taken
   off the others): BPF time per sample of each process, their ratio,
   the share of redis samples taken in the kernel, what its kernel stacks
   cost, the agents' CPU in steady state.
4. Python (Debian's python3.11, no frame pointers): a 30-deep recursion
   (tests/workload/pydeep.py) under the agent and, when installed,
   `py-spy record --nonblocking` at once: BPF time and CPU per sample, Python
   frames per sample; then ten daemon-like processes
   (tests/workload/pydaemon.py, a different variant each) under the agent
   at its default frequency and interval: agent CPU, peak RSS, heap, BPF
   maps, wire bytes per sample, the stack trie's nodes by kind of frame,
   and code object reads per second (the
   agent's process_vm_readv calls to the daemons, recorded by `perf record`
   on the syscall's tracepoint) in steady state, the second half of the run;
   and a second agent with -p on the daemons alone, as on a switch, 600 s,
   counting its last 180 s (its stack trie fills for minutes), with its
   bytes per sample per minute.
5. Fleet (`fleetprof loadgen`, simulated devices at 200 samples/s each, one
   batch every 10 s): samples accepted and resolved per second and per CPU
   second of the symbolizer with 1,000 and with 10,000 devices, reply
   latency, server memory per session; then 50 devices sending every
   second while device 0 names librbd.so.1, whose 137 MB debug file the
   symbolizer ingests: reply p99 meanwhile, and the time from that
   device's first batch to the first profile with librbd's names in it.
6. Unwind tables at fleet scale (`--only tables`): 1,000 loadgen devices
   whose files' tables the symbolizer compiled before they start, taking
   them (table bytes per session) or holding them already (their hellos
   say so: none is sent), three runs each in turn, reply p99; then an
   agent restarted on redis-server against a symbolizer that has its
   tables (run without --local-files): the share of whole stacks in its
   first 2 s of sampling and the table bytes it received, with its table
   cache off and on.

6. The fleet path as deployed: redis-server under redis-benchmark, the
   agent at -i 2 against a symbolizer without --local-files (libc's
   symbols from /usr/lib/debug, its CFI from the device): the share of
   redis-server's stacks that reach _start, from the third interval on.

Every agent + symbolizer run here uses the fleet path (no --local-files:
symbols from /usr/lib/debug and the devices); only `fleetprof loadgen`'s
symbolizer reads local files, since its simulated devices cannot send any.

6. Device (`--only device`): the agent on the whole host (no -p) while it
   runs redis-server under redis-benchmark, python3.11 (pywork.py) and the
   frame-pointer workload, against the symbolizer without --local-files,
   as deployed: its CPU from exec to its first sample over several starts
   and the verifier's share of it; its RSS and BPF map memory, mapped
   pages counted once, and what they are made of; the unwind rows in use
   and the chunks held for them; BPF time per sample; the ring buffer's
   use.

7. Off-CPU (`--only offcpu`): a context-switch storm (two threads passing
   a byte through pipes) with no profiler, under fleetprof-agent --off-cpu
   and under offcputime (libbpf-tools), rounds interleaved: its passes a
   second, the agent's CPU, memory and counters (every wait counted,
   stacks taken and left, records lost); then waitwork's off-CPU shares
   by `fleetprof record --off-cpu` on the whole host under the storm
   against offcputime's at once.

Prints a table with ratios and writes it to BUILD/bench.txt.  --only runs
some parts (footprint includes the 999 Hz throughput rows).
"""
import argparse
import glob
import json
import os
import threading
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_cpu(proc):
    """Reap proc and return the CPU seconds it used (user + system)."""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


class PeakRss(threading.Thread):
    """Follows a process's VmHWM (kib) and the peak of its RssAnon, the heap
    and other private memory (anon_kib), until it exits.  (getrusage's
    ru_maxrss is no good here: a child forked from this Python process
    inherits its high-water mark across exec.)"""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.kib, self.anon_kib = pid, 0, 0
        self.start()

    def run(self):
        while True:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.kib = max(self.kib, int(line.split()[1]))
                        elif line.startswith("RssAnon:"):
                            self.anon_kib = max(self.anon_kib, int(line.split()[1]))
            except (OSError, ValueError):
                return
            time.sleep(0.2)


def cpu_ns(pid):
    """CPU time pid has used so far, ns: the sum over its threads of
    /proc/PID/task/TID/schedstat (utime + stime in /proc/PID/stat count
    10 ms ticks)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def workload_iterations(workload, seconds):
    out = subprocess.run([workload, str(seconds)], capture_output=True, text=True, check=True)
    return int(re.search(r"iterations (\d+)", out.stdout).group(1))


class Symbolizer:
    """The fleet path as deployed: no --local-files (the devices' files
    come from the debug directory, /usr/lib/debug, and the devices);
    local_files for `fleetprof loadgen`, whose simulated devices cannot
    send files."""

    def __init__(self, build, tmp, local_files=False):
        self.addr = f"tcp://127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [f"{build}/fleetprof-symbolizer", *(["--local-files"] if local_files else []),
             "--listen", self.addr, "--cache", f"{tmp}/cache", "--out", f"{tmp}/out"],
            stderr=subprocess.DEVNULL)
        time.sleep(0.3)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()


def start_agent(build, addr, hz, interval, pid=None, extra=("--table-cache-mb", "0")):
    """pid: one process, a list of them (-p each), or None for all.  The
    agent keeps no tables on disk unless extra says so: the figures are
    those of a first contact, whatever earlier runs left."""
    pids = pid if isinstance(pid, list) else [pid] if pid else []
    return subprocess.Popen(
        [f"{build}/fleetprof-agent", "--server", addr, "-F", str(hz), "--interval", str(interval),
         *[x for p in pids for x in ("-p", str(p))], *extra, "-v"], stderr=subprocess.PIPE,
        text=True)


def bpf_stats(on):
    """The kernel's BPF run-time accounting, which the agent reports."""
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1" if on else "0")


def perf_samples(data):
    return sum(1 for line in subprocess.run(
        ["perf", "script", "-i", data, "-F", "period"], capture_output=True,
        text=True).stdout.splitlines() if line.strip())


class AgentLog(threading.Thread):
    """Reads an agent's log as it comes; at the end of each interval, notes
    (samples of the interval, time, [cpu_ns(p) for p in pids])."""

    def __init__(self, agent, pids):
        super().__init__(daemon=True)
        self.agent, self.pids, self.lines, self.marks = agent, pids, [], []
        self.start()

    def run(self):
        for line in self.agent.stderr:
            m = re.search(r"interval \d+: (\d+) samples", line)
            if m:
                self.marks.append((int(m.group(1)), time.monotonic(), [cpu_ns(p) for p in self.pids]))
            self.lines.append(line)


def stop_agent(agent, tail=None):
    """SIGINT; the CPU seconds the agent used and its log (as tail, an
    AgentLog, read it when given)."""
    agent.send_signal(signal.SIGINT)
    if tail:
        tail.join()
        log = "".join(tail.lines)
    else:
        log = agent.stderr.read()
    return wait_cpu(agent), log


def bpf_figures(log):
    """(runs, ns per run, map bytes) of the agent's "bpf:" line."""
    m = re.search(r"bpf: (\d+) runs, (\d+) ns/run, maps (\d+) bytes", log)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def rows_mapped(log):
    """The bytes of unwind rows the agent maps (counted in its RSS too)."""
    m = re.search(r"maps \d+ bytes \((\d+) of rows, mapped", log)
    return int(m.group(1)) if m else 0


def samples_taken(log):
    m = re.search(r"sampled (\d+) samples", log)
    return int(m.group(1)) if m else 0


PY_COUNTERS = ("procs", "unknown_version", "bad_offsets", "frames", "no_thread", "mismatch",
               "read_err", "code_reads", "code_stale", "code_errors", "bytes_read")


def python_counters(log):
    """The numbers of the agent's "python:" line (log_python), by PY_COUNTERS."""
    m = re.search(r"python: (\d+) processes walked, (\d+) of unknown versions, (\d+) with offsets "
                  r"that do not fit; frames (\d+), samples whose thread state was not found (\d+), "
                  r"whose Python and native stacks disagreed (\d+) \(native kept\), memory "
                  r"unreadable mid-walk (\d+); code objects read (\d+) \((\d+) reused since "
                  r"sampled, (\d+) unreadable\), (\d+) bytes", log)
    c = dict(zip(PY_COUNTERS, (int(x) for x in m.groups()) if m else [0] * len(PY_COUNTERS)))
    c["rehello"] = log.count("symbolizer lost our session")
    return c


def acked_intervals(log):
    """(samples, bytes) of each acknowledged interval, in order."""
    return [(int(s), int(b)) for s, b in
            re.findall(r"acknowledged: (\d+) samples in (\d+) bytes", log)]


def bytes_per_sample(acks):
    samples = sum(s for s, _ in acks)
    return sum(b for _, b in acks) / samples if samples else float("nan")


def steady_bytes_per_sample(log, last=None):
    """Bytes per sample over the last `last` acknowledged intervals, or
    over the second half of them."""
    acks = acked_intervals(log)
    return bytes_per_sample(acks[len(acks) // 2:] if last is None else acks[-last:])


def footprint(args, tmp):
    wl = subprocess.Popen([args.workload], stdout=subprocess.DEVNULL)
    symb = Symbolizer(args.build, tmp)
    try:
        # The first agent of a kernel build uploads its kallsyms, once for
        # the fleet: measured on its own, then the steady state.
        warm = start_agent(args.build, symb.addr, 99, 1)
        time.sleep(3)
        warm_cpu, warm_log = stop_agent(warm)
        bpf_stats(True)
        agent = start_agent(args.build, symb.addr, 99, 5)
        agent_rss = PeakRss(agent.pid)
        perf = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-F", "99", "-o",
                                 f"{tmp}/perf.data", "--", "sleep", str(args.seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        perf_rss = PeakRss(perf.pid)
        perf_cpu = wait_cpu(perf)
        agent_cpu, log = stop_agent(agent)
    finally:
        bpf_stats(False)
        wl.kill()
        wl.wait()
        symb.stop()
    nperf = perf_samples(f"{tmp}/perf.data")
    runs, ns_per_run, map_bytes = bpf_figures(log)
    sampled = samples_taken(log)
    wire = re.search(r"wire: (\d+) bytes of batches \(([\d.]+) bytes/sample\)", log)
    ksyms = re.search(r"(\d+) bytes of kallsyms", warm_log)
    return {
        "agent_cpu": agent_cpu, "perf_cpu": perf_cpu,
        "agent_rss_kb": agent_rss.kib, "perf_rss_kb": perf_rss.kib,
        "map_bytes": map_bytes, "ns_per_run": ns_per_run, "runs": runs,
        "agent_samples": sampled, "perf_samples": nperf,
        "bytes_per_sample_all": float(wire.group(2)) if wire else float("nan"),
        "bytes_per_sample_steady": steady_bytes_per_sample(log),
        "kallsyms_bytes": int(ksyms.group(1)) if ksyms else 0,
        "warm_cpu": warm_cpu,
        "rows_bytes": rows_mapped(log),
    }


def throughput(args, tmp):
    """Median of interleaved rounds: none, agent, perf, none, agent, ..."""
    secs, runs = args.throughput_seconds, {"base": [], "agent": [], "perf": []}
    symb = Symbolizer(args.build, tmp)
    try:
        for _ in range(args.rounds):
            runs["base"].append(workload_iterations(args.workload, secs))
            agent = start_agent(args.build, symb.addr, 999, 5)
            time.sleep(1)
            runs["agent"].append(workload_iterations(args.workload, secs))
            stop_agent(agent)
            perf = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-F", "999", "-o",
                                     f"{tmp}/perf999.data", "--", "sleep", str(secs + 2)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            runs["perf"].append(workload_iterations(args.workload, secs))
            wait_cpu(perf)
    finally:
        symb.stop()
    med = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
    return {"agent_loss": 100.0 * (1 - med["agent"] / med["base"]),
            "perf_loss": 100.0 * (1 - med["perf"] / med["base"]), "runs": runs}


def section_size(path, name):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[1] == name:
            return int(f[5], 16)
    return 0


def unwind_bench(args, tmp):
    deep = f"{tmp}/deep"
    subprocess.run(["gcc", "-O2", "-g", "tests/workload/deep.c", "-o", deep], check=True)
    secs = args.unwind_seconds
    wl = subprocess.Popen([deep, str(secs + 6)])
    symb = Symbolizer(args.build, f"{tmp}/unwind")
    perfs = {}
    try:
        bpf_stats(True)
        agent = start_agent(args.build, symb.addr, 99, 1, wl.pid)
        agent_rss = PeakRss(agent.pid)
        for name, cg in (("dwarf", ["--call-graph", "dwarf"]), ("fp", ["-g"])):
            perfs[name] = subprocess.Popen(
                ["perf", "record", "-q", "-F", "99", *cg, "-p", str(wl.pid), "-o",
                 f"{tmp}/perf-{name}.data", "--", "sleep", str(secs)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        perf_rss = {n: PeakRss(p.pid) for n, p in perfs.items()}
        perf_cpu = {n: wait_cpu(p) for n, p in perfs.items()}
        agent_cpu, log = stop_agent(agent)
    finally:
        bpf_stats(False)
        wl.kill()
        wl.wait()
        symb.stop()
    perf_bytes = {}
    for n in perfs:
        data = f"{tmp}/perf-{n}.data"
        nsamp = perf_samples(data)
        perf_bytes[n] = os.path.getsize(data) / nsamp if nsamp else float("nan")
    _, ns_per_run, map_bytes = bpf_figures(log)
    tables = re.search(r"(\d+) bytes of unwind tables", log)
    rows_bytes = rows_mapped(log)
    # Per 1 s interval from the first sample: the share of whole stacks
    # (all 30 frames down to _start).
    whole = []
    for path in sorted(glob.glob(f"{tmp}/unwind/out/*/*.folded"))[:4]:
        total = good = 0
        for line in open(path):
            stack, _, n = line.rstrip().rpartition(" ")
            if "spin" in stack:
                total += int(n)
                good += int(n) if ";_start;" in stack and stack.count(";down") == 28 else 0
        whole.append(f"{100 * good // total}%" if total else "-")
    files = {}
    for name, path in (("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
                       ("python3", os.path.realpath("/usr/bin/python3"))):
        t0 = time.perf_counter()
        subprocess.run([f"{args.build}/fleetprof", "symbolize", "-e", path, "--unwind-table",
                        "-o", f"{tmp}/{name}.table"], check=True, capture_output=True)
        ms = 1000 * (time.perf_counter() - t0)
        files[name] = (os.path.getsize(f"{tmp}/{name}.table"), section_size(path, ".eh_frame"), ms)
    return {"ns_per_run": ns_per_run, "map_bytes": map_bytes, "agent_cpu": agent_cpu,
            "agent_rss_kb": agent_rss.kib, "perf_cpu": perf_cpu,
            "perf_rss_kb": {n: r.kib for n, r in perf_rss.items()}, "perf_bytes": perf_bytes,
            "steady": steady_bytes_per_sample(log),
            "table_bytes": int(tables.group(1)) if tables else 0, "whole": whole,
            "rows_bytes": rows_bytes,
            "files": files}


def bpf_enable_stats():
    """A descriptor that keeps the kernel's BPF run-time accounting on while
    it is open (BPF_ENABLE_STATS), whatever other runs do to the sysctl."""
    import ctypes
    nr = {"x86_64": 321, "aarch64": 280}[os.uname().machine]  # __NR_bpf
    attr = ctypes.create_string_buffer(16)  # type 0: BPF_STATS_RUN_TIME
    fd = ctypes.CDLL(None, use_errno=True).syscall(nr, 32, attr, len(attr))  # BPF_ENABLE_STATS
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_ENABLE_STATS")
    return fd


def bpf_object_ids(pid, kind):
    """{name: id} of the BPF programs or maps (kind "prog" or "map") process
    pid holds descriptors of."""
    ids = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != f"anon_inode:bpf-{kind}":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(l.split(":", 1) for l in f if ":" in l)
        except OSError:
            continue
        i = int(info[f"{kind}_id"])
        out = subprocess.run(["bpftool", kind, "show", "id", str(i), "-j"], capture_output=True, text=True)
        ids[json.loads(out.stdout)["name"]] = i
    return ids


def sampler_figures(pid):
    """(run ns, runs) of agent pid's fp_sample program, the kernel's figures,
    and (samples, walks, walks to the root) from its counters map."""
    progs, maps = bpf_object_ids(pid, "prog"), bpf_object_ids(pid, "map")
    out = subprocess.run(["bpftool", "prog", "show", "id", str(progs["fp_sample"]), "-j"],
                         capture_output=True, text=True)
    prog = json.loads(out.stdout)
    out = subprocess.run(["bpftool", "map", "dump", "id", str(maps["counters"]), "-j"],
                         capture_output=True, text=True)
    counts = {}
    for e in json.loads(out.stdout):
        k = e["formatted"]["key"] if "formatted" in e else int.from_bytes(bytes(int(x, 16) for x in e["key"]), "little")
        vals = e["formatted"]["values"] if "formatted" in e else e["values"]
        counts[k] = sum(v["value"] if isinstance(v["value"], int) else
                        int.from_bytes(bytes(int(x, 16) for x in v["value"]), "little") for v in vals)
    return prog.get("run_time_ns", 0), prog.get("run_cnt", 0), counts.get(0, 0), counts.get(4, 0), counts.get(5, 0)


def kernel_bench(args, tmp):
    """Kernel-mode samples: redis-server under redis-benchmark (most of its
    samples in the kernel) next to deep (gcc -O2, 30 frames, user mode),
    one agent -p on each, a third on redis-server with --user-stacks-only
    and a fourth on an idle process, whose runs are what the filter costs
    on the other processes' ticks (subtracted from the others').  Figures
    over args.kernel_seconds after args.kernel_warmup (tables installed)."""
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        return None
    deep = f"{tmp}/kdeep"
    subprocess.run(["gcc", "-O2", "-g", "tests/workload/deep.c", "-o", deep], check=True)
    port = free_port()
    procs, stats_fd = [], bpf_enable_stats()
    symb, symb_redis = Symbolizer(args.build, f"{tmp}/kernel"), Symbolizer(args.build, f"{tmp}/kernel-redis")
    try:
        rs = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)
        procs.append(rs)
        time.sleep(0.5)
        procs.append(subprocess.Popen(["redis-benchmark", "-p", str(port), "-q", "-l", "-c", "50", "-d", "64",
                                       "-t", "set,get"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        secs = args.kernel_warmup + args.kernel_seconds + 10
        wl = subprocess.Popen([deep, str(secs)])
        idle = subprocess.Popen(["sleep", str(secs)])
        procs += [wl, idle]
        agents = {}
        for name, addr, pid, extra in (("redis", symb_redis.addr, rs.pid, ()),
                                       ("redis-user-only", symb.addr, rs.pid, ("--user-stacks-only",)),
                                       ("deep", symb.addr, wl.pid, ()), ("idle", symb.addr, idle.pid, ())):
            agents[name] = subprocess.Popen(
                [f"{args.build}/fleetprof-agent", "--server", addr, "-F", "99", "-p", str(pid), *extra],
                stderr=subprocess.DEVNULL)
        procs += agents.values()
        time.sleep(args.kernel_warmup)
        t0, wall0 = time.monotonic(), time.time()
        before = {n: (sampler_figures(a.pid), cpu_ns(a.pid)) for n, a in agents.items()}
        time.sleep(args.kernel_seconds)
        after = {n: (sampler_figures(a.pid), cpu_ns(a.pid)) for n, a in agents.items()}
        elapsed = time.monotonic() - t0
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGINT if p.args[0].endswith("fleetprof-agent") else signal.SIGTERM)
        for p in procs:
            p.wait()
        os.close(stats_fd)
        symb.stop()
        symb_redis.stop()
    d = {n: [y - x for x, y in zip(before[n][0], after[n][0])] + [after[n][1] - before[n][1]] for n in agents}
    filter_ns = d["idle"][0] / max(1, d["idle"][1])
    res = {"filter_ns": filter_ns, "elapsed": elapsed}
    for n, (rt, runs, samples, walks, roots, cpu) in d.items():
        res[n] = {"samples": samples, "gross_us": rt / max(1, samples) / 1e3,
                  "us": (rt - (runs - samples) * filter_ns) / max(1, samples) / 1e3,
                  "root_pct": 100 * roots / max(1, walks), "cpu_pct": 100 * cpu / 1e9 / elapsed}
    # Samples of redis-server in the kernel (with kernel frames) and their
    # kernel frames, from the symbolizer's profiles of the window.
    kern = all_ = kframes = 0
    for stack, n in folded_stacks(f"{tmp}/kernel-redis/out", since=wall0):
        if stack.startswith("redis-server;"):
            all_ += n
            k = stack.count("_[k]")
            kern += n if k else 0
            kframes += k * n
    res["kernel_pct"] = 100 * kern / max(1, all_)
    res["kframes"] = kframes / max(1, kern)
    return res


PYDEEP = "tests/workload/pydeep.py"
PYDAEMON = "tests/workload/pydaemon.py"


def py_spy():
    spy = shutil.which("py-spy") or "/usr/local/bin/py-spy"
    return spy if os.access(spy, os.X_OK) else None


def folded_stacks(out_dir, since=0.0):
    """(stack, samples) of the symbolizer's folded files written since."""
    for path in glob.glob(f"{out_dir}/*/*.folded"):
        if os.path.getmtime(path) >= since:
            for line in open(path):
                stack, _, n = line.rstrip().rpartition(" ")
                yield stack, int(n)


def hottest_stack(out_dir):
    """The stack on most samples over all the symbolizer's folded files."""
    counts = {}
    for stack, n in folded_stacks(out_dir):
        counts[stack] = counts.get(stack, 0) + n
    return max(counts, key=counts.get) if counts else ""


def warm_symbolizer(args, symb, pid=None):
    """The fleet's steady state: kallsyms and the unwind tables of the
    binaries running are with the symbolizer already (a new agent still
    gets the tables in its replies).  Gives the symbolizer the time to
    build them: on a loaded host, the first reply can take longer than the
    agent's timeout."""
    warm = start_agent(args.build, symb.addr, 99, 1, pid)
    time.sleep(3)
    stop_agent(warm)


def python_deep(args, tmp, symb):
    """pydeep.py (30 Python frames deep) under the agent, -p, and py-spy at once."""
    secs = args.python_seconds
    wl = subprocess.Popen([args.python, PYDEEP, str(secs + 10)], stdout=subprocess.DEVNULL)
    spy, spy_cpu, spy_samples, spy_pid = py_spy(), 0.0, 0, 0
    try:
        time.sleep(1)
        warm_symbolizer(args, symb, wl.pid)
        bpf_stats(True)
        agent = start_agent(args.build, symb.addr, 99, 5, wl.pid)
        agent_rss = PeakRss(agent.pid)
        if spy:
            sp = subprocess.Popen([spy, "record", "--nonblocking", "-r", "99", "-p", str(wl.pid),
                                   "-d", str(secs), "-f", "raw", "-o", f"{tmp}/spy.raw"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            spy_pid = sp.pid
        tail = AgentLog(agent, [agent.pid, spy_pid])
        if spy:
            spy_out = sp.stdout.read()
            spy_cpu = wait_cpu(sp)
            m = re.search(r"Samples: (\d+)", spy_out)
            spy_samples = int(m.group(1)) if m else 0
        else:
            time.sleep(secs)
        agent_cpu, log = stop_agent(agent, tail)
    finally:
        bpf_stats(False)
        wl.kill()
        wl.wait()
    runs, ns_per_run, _ = bpf_figures(log)
    # Steady state: from the end of the first interval to the last one
    # closed while py-spy ran (its samples: its rate times the window).
    marks = [m for m in tail.marks if m[2][1] or not spy]
    first, last = (marks[0], marks[-1]) if len(marks) > 1 else (None, None)
    steady = {}
    if first:
        window = last[1] - first[1]
        steady = {"agent_s": (last[2][0] - first[2][0]) / 1e9,
                  "samples": sum(m[0] for m in marks[1:]),
                  "spy_s": (last[2][1] - first[2][1]) / 1e9,
                  "spy_samples": spy_samples * window / secs, "window": window}
    walks = re.search(r"stack walks: (\d+)", log)
    return {"runs": runs, "ns_per_run": ns_per_run, "samples": samples_taken(log),
            "walks": int(walks.group(1)) if walks else 0, "steady_wire": steady_bytes_per_sample(log),
            "agent_cpu": agent_cpu, "agent_rss_kb": agent_rss.kib, "py": python_counters(log),
            "hot_py_frames": hottest_stack(f"{tmp}/python/out").count("_[py]"),
            "spy": spy, "spy_cpu": spy_cpu, "spy_samples": spy_samples, "steady": steady}


def python_daemons(args, tmp, symb):
    """Ten pydaemon.py variants under the agent, all processes, default
    frequency and interval; the second half of the run is the steady state.
    A second agent beside it samples only the daemons (-p each), as one
    agent on a switch would: their own wire bytes, whatever else the host
    runs.  Its stack trie takes minutes to settle (bytes per sample fall
    minute after minute), so it runs longer, --daemon-only-seconds, and
    its last --daemon-only-steady seconds are counted."""
    secs = args.daemon_seconds
    only_secs = max(secs, args.daemon_only_seconds)
    daemons = [subprocess.Popen([args.python, PYDAEMON, str(v), str(only_secs + 10)])
               for v in range(10)]
    try:
        time.sleep(1)
        warm_symbolizer(args, symb)
        started = time.time()
        bpf_stats(True)
        agent = start_agent(args.build, symb.addr, 99, 10)
        only = start_agent(args.build, symb.addr, 99, 10, [d.pid for d in daemons])
        only_tail = AgentLog(only, [])
        t0 = time.monotonic()
        rss = PeakRss(agent.pid)
        # Every code object read is a few process_vm_readv calls: each
        # one's time and target pid from the syscall's tracepoint.
        rec = subprocess.Popen(["perf", "record", "-q", "-k", "mono", "-e",
                                "syscalls:sys_enter_process_vm_readv", "-p", str(agent.pid),
                                "-o", f"{tmp}/readv.data", "--", "sleep", str(secs)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(secs - secs // 2)
        cpu0, t1 = cpu_ns(agent.pid), time.monotonic()
        rec.wait()
        cpu1, t2 = cpu_ns(agent.pid), time.monotonic()
        agent_cpu, log = stop_agent(agent)
        elapsed = time.monotonic() - t0
        time.sleep(max(0.0, only_secs - (time.monotonic() - t0)))
        _, only_log = stop_agent(only, only_tail)
    finally:
        bpf_stats(False)
        for d in daemons:
            d.kill()
            d.wait()
    trace = subprocess.run(["perf", "script", "-i", f"{tmp}/readv.data"], capture_output=True,
                           text=True).stdout
    readv = [(float(t), int(p, 16)) for t, p in re.findall(
        r" ([\d.]+): syscalls:sys_enter_process_vm_readv: pid: 0x([0-9a-f]+)", trace)]
    mine = {d.pid for d in daemons}
    runs, ns_per_run, map_bytes = bpf_figures(log)
    wire = re.search(r"wire: (\d+) bytes of batches \(([\d.]+) bytes/sample\)", log)
    trie = re.search(r"stack trie: (\d+) nodes: (\d+) native user frames, (\d+) kernel, "
                     r"(\d+) Python", log)
    # The host runs other processes too: the daemons' share of the samples.
    total = py = 0
    for stack, n in folded_stacks(f"{tmp}/python/out", started):
        total += n
        py += n if stack.startswith(os.path.basename(args.python) + ";") else 0
    return {"agent_cpu": agent_cpu, "elapsed": elapsed, "steady_s": t2 - t1,
            "steady_cpu_s": (cpu1 - cpu0) / 1e9, "rss_kb": rss.kib, "anon_kb": rss.anon_kib,
            "map_bytes": map_bytes, "runs": runs, "ns_per_run": ns_per_run,
            "samples": samples_taken(log), "share": 100.0 * py / total if total else 0.0,
            "steady": steady_bytes_per_sample(log),
            "only": steady_bytes_per_sample(only_log, args.daemon_only_steady // 10),
            # per minute (six 10 s intervals) of the agent on the daemons
            "only_minutes": [bytes_per_sample(acked_intervals(only_log)[k:k + 6])
                             for k in range(0, len(acked_intervals(only_log)) - 5, 6)],
            "all": float(wire.group(2)) if wire else float("nan"),
            "trie": [int(x) for x in trie.groups()] if trie else [0, 0, 0, 0],
            "readv_per_s": sum(p in mine for t, p in readv if t >= t1) / (t2 - t1),
            "readv_other_per_s": sum(p not in mine for t, p in readv if t >= t1) / (t2 - t1),
            # per 10 s interval from the agent's start, to the daemons
            "readv_per_10s": [sum(p in mine for t, p in readv if t0 + k <= t < t0 + k + 10) / 10
                              for k in range(0, secs - 9, 10)],
            "py": python_counters(log)}


def python_bench(args, tmp):
    symb = Symbolizer(args.build, f"{tmp}/python")
    try:
        deep = python_deep(args, tmp, symb)
        daemons = python_daemons(args, tmp, symb)
    finally:
        symb.stop()
    return {"deep": deep, "daemons": daemons}


def libc_debug_file():
    out = subprocess.run(["readelf", "-n", "/lib/x86_64-linux-gnu/libc.so.6"],
                         capture_output=True, text=True).stdout
    h = re.search(r"Build ID: ([0-9a-f]+)", out).group(1)
    return f"/usr/lib/debug/.build-id/{h[:2]}/{h[2:]}.debug", h


def random_addresses(debug, n, path):
    """n addresses inside random functions of debug's symbol table."""
    import random
    funcs = []
    for line in subprocess.run(["readelf", "-sW", debug], capture_output=True,
                               text=True).stdout.splitlines():
        f = line.split()
        if len(f) > 7 and f[3] == "FUNC" and f[2].isdigit() and int(f[2]) > 0:
            funcs.append((int(f[1], 16), int(f[2])))
    rng = random.Random(1)
    with open(path, "w") as out:
        for _ in range(n):
            a, size = rng.choice(funcs)
            out.write(f"{a + rng.randrange(size):#x}\n")


def parse_frames(text, with_address):
    """Per address, the [(function, line)] frames of llvm-symbolizer-style
    output (blank line between addresses) or of addr2line -a -f -i."""
    result = []
    if with_address:
        cur = None
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("0x"):
                cur = []
                result.append(cur)
                i += 1
                continue
            fn, loc = lines[i], lines[i + 1] if i + 1 < len(lines) else "??:0"
            line = loc.rsplit(":", 1)[-1].split()[0] if ":" in loc else "0"
            if loc.count(":") >= 2:  # file:line:column
                line = loc.rsplit(":", 2)[-2]
            cur.append((fn.split(" inlined at ")[0].strip(), line))
            i += 2
        return result
    for block in text.split("\n\n"):
        lines = [l for l in block.splitlines() if l]
        if not lines:
            continue
        frames = []
        for fn, loc in zip(lines[0::2], lines[1::2]):
            parts = loc.rsplit(":", 2)
            frames.append((fn.strip(), parts[-2] if len(parts) == 3 else "0"))
        result.append(frames)
    return result


def unversioned(name):
    """name without an ELF symbol version, by fp_elf_unversioned_len's
    rule: "getgrnam_r@@GLIBC_2.2.5" -> "getgrnam_r"."""
    base, at, version = name.partition("@")
    if version.startswith("@"):
        version = version[1:]
    return base if base and at and version and "@" not in version else name


def agreement(ours, ref):
    same = sum(1 for a, b in zip(ours, ref) if a == b)
    return 100.0 * same / max(1, len(ref))


def timed(cmd, stdin_path):
    with open(stdin_path) as f:
        t0 = time.perf_counter()
        out = subprocess.run(cmd, stdin=f, capture_output=True, text=True)
        return time.perf_counter() - t0, out.stdout


def symbolizer_bench(args, tmp):
    debug, hexid = libc_debug_file()
    addrs, one = f"{tmp}/addrs", f"{tmp}/one"
    random_addresses(debug, 20000, addrs)
    with open(addrs) as f, open(one, "w") as o:
        o.write(f.readline())
    fp = f"{args.build}/fleetprof"
    cache = f"{tmp}/symcache"
    tools = {
        "fleetprof": [fp, "symbolize", "-e", debug],
        "fleetprof --cache": [fp, "symbolize", "-e", debug, "--cache", cache],
        "llvm-symbolizer": ["llvm-symbolizer", f"--obj={debug}"],
        "addr2line": ["addr2line", "-a", "-f", "-i", "-C", "-e", debug],
        "eu-addr2line": ["eu-addr2line", "-a", "-f", "-i", "-C", "-e", debug],
    }
    # The warm fleetprof: the table is in the LMDB cache already.
    lb = subprocess.run([f"{args.build}/bench/lookup_bench", debug, addrs], capture_output=True,
                        text=True).stdout
    fig = dict(l.split("=") for l in lb.split())
    rows, outputs, runs = {}, {}, {}
    # Fills the cache: the "fleetprof --cache" rows are its warm runs.
    subprocess.run(tools["fleetprof --cache"], stdin=subprocess.DEVNULL, capture_output=True,
                   check=True)
    for name, cmd in tools.items():
        t_all, out = timed(cmd, addrs)
        t_one, _ = timed(cmd, one)
        # llvm-symbolizer (and addr2line) keep ELF symbol versions in
        # names, which we show in the system name only: compared without.
        outputs[name] = [[(unversioned(fn), line) for fn, line in frames]
                         for frames in parse_frames(out, name in ("addr2line", "eu-addr2line"))]
        rows[name] = (t_all / 20000 * 1e6, max(t_all - t_one, 1e-9) / 19999 * 1e6, t_one * 1e3)
        runs[name] = t_all
    # Whole runs on the 20,000 addresses, start-up included: the median of 5.
    for name in ("fleetprof --cache", "llvm-symbolizer"):
        runs[name] = sorted([runs[name]] + [timed(tools[name], addrs)[0] for _ in range(4)])[2]
    ref = outputs["llvm-symbolizer"]
    dwarf = sum(int(l.split()[5], 16) for l in subprocess.run(
        ["readelf", "-SW", debug], capture_output=True, text=True).stdout.splitlines()
        if ".debug_" in l and len(l.split()) > 6 and l.split()[1].startswith(".debug_"))
    return {"rows": rows, "agree": {k: agreement(v, ref) for k, v in outputs.items()},
            "cached_run_s": runs["fleetprof --cache"], "llvm_run_s": runs["llvm-symbolizer"],
            "ingest_ms": float(fig["ingest_ms"]), "table_bytes": int(fig["table_bytes"]),
            "frames_per_s": float(fig["frames_per_s"]), "dwarf_bytes": dwarf}


def footprint_lines(args, fp, tp):
    ncpu = os.cpu_count()
    agent_pct = 100.0 * fp["agent_cpu"] / args.seconds
    perf_pct = 100.0 * fp["perf_cpu"] / args.seconds
    bpf_pct = 100.0 * fp["runs"] * fp["ns_per_run"] / 1e9 / args.seconds
    rows = [
        (f"samples taken ({args.seconds} s, 99 Hz, all CPUs)", f"{fp['agent_samples']}", f"{fp['perf_samples']}", ""),
        (f"process CPU time, s", f"{fp['agent_cpu']:.3f}", f"{fp['perf_cpu']:.3f}",
         f"{fp['agent_cpu'] / fp['perf_cpu']:.3f}x" if fp["perf_cpu"] else "-"),
        ("process CPU, % of one core", f"{agent_pct:.3f}", f"{perf_pct:.3f}", ""),
        ("BPF program run time per sample, ns", f"{fp['ns_per_run']}", "-", ""),
        ("agent CPU + BPF, % of one core per 100 Hz per CPU",
         f"{(agent_pct + bpf_pct) / ncpu * 100 / 99:.4f}", "-", ""),
        ("peak RSS, KiB", f"{fp['agent_rss_kb']}", f"{fp['perf_rss_kb']}",
         f"{fp['agent_rss_kb'] / fp['perf_rss_kb']:.3f}x"),
        ("BPF map memory, KiB", f"{fp['map_bytes'] // 1024}", "-", ""),
        # The table rows are a BPF map mapped into the agent: in both.
        ("RSS + maps, table rows counted once, MiB",
         f"{(fp['agent_rss_kb'] * 1024 + fp['map_bytes'] - fp['rows_bytes']) / 2**20:.2f}", "-", ""),
        ("wire bytes/sample, steady state", f"{fp['bytes_per_sample_steady']:.2f}", "-", ""),
        ("wire bytes/sample, whole run (excl. kallsyms)", f"{fp['bytes_per_sample_all']:.2f}", "-", ""),
        ("kallsyms upload, once per kernel build, KiB", f"{fp['kallsyms_bytes'] // 1024}", "-", ""),
        ("first agent of a kernel build: CPU s in its first 3 s", f"{fp['warm_cpu']:.3f}", "-", ""),
        (f"workload throughput loss at 999 Hz, % (median of {args.rounds})",
         f"{tp['agent_loss']:.1f}", f"{tp['perf_loss']:.1f}", ""),
    ]
    lines = [f"{'':52} {'fleetprof':>12} {'perf':>12} {'ratio':>8}"]
    return lines + [f"{a:52} {b:>12} {c:>12} {d:>8}" for a, b, c, d in rows]


def symbolizer_lines(sb):
    lines = ["Symbolizer: 20,000 random addresses in libc's debug file "
             "(time per address, microseconds; agreement with llvm-symbolizer: "
             "function without ELF symbol version and line of every frame, inline chains "
             "included; fleetprof --cache: the table cached by an earlier run)",
             f"{'':22} {'cold (1 run)':>14} {'warm':>10} {'startup ms':>11} {'agree %':>8}"]
    for name, (cold, warm, one) in sb["rows"].items():
        lines.append(f"{name:22} {cold:>14.2f} {warm:>10.3f} {one:>11.1f} {sb['agree'][name]:>8.2f}")
    llvm_warm = sb["rows"]["llvm-symbolizer"][1]
    return lines + [
        f"fleetprof in-process warm look-up: {sb['frames_per_s'] / 1e6:.1f} M frames/s on one core "
        f"({1e6 / sb['frames_per_s']:.3f} us/frame; llvm-symbolizer {llvm_warm:.2f} us/address, "
        f"{llvm_warm * sb['frames_per_s'] / 1e6:.0f}x)",
        f"ingest of libc's debug file: {sb['ingest_ms']:.0f} ms; table {sb['table_bytes'] / 2**20:.2f} MiB "
        f"vs DWARF {sb['dwarf_bytes'] / 2**20:.2f} MiB as stored",
        f"fleetprof symbolize --cache, table cached, whole run on the 20,000 addresses: "
        f"{sb['cached_run_s'] * 1e3:.1f} ms, llvm-symbolizer {sb['llvm_run_s'] * 1e3:.1f} ms "
        f"({sb['llvm_run_s'] / sb['cached_run_s']:.1f}x faster; median of 5)"]


def encode_lines(enc):
    return [f"Encoding one interval of {enc['stacks']} distinct stacks ({enc['samples']} samples, "
            f"{enc['frames']} frames):",
            f"  build {float(enc['build_ms']):7.2f} ms  (the profile model, from the stacks)",
            f"  OTLP  {float(enc['otlp_ms']):7.2f} ms  {int(enc['otlp_bytes']):>9} bytes  "
            f"{float(enc['otlp_bytes_per_sample']):6.2f} bytes/sample",
            f"  pprof {float(enc['pprof_ms']):7.2f} ms  {int(enc['pprof_bytes']):>9} bytes  "
            f"{float(enc['pprof_bytes_per_sample']):6.2f} bytes/sample (uncompressed)"]


def unwind_lines(args, uw):
    lines = [f"Unwinding a 30-frame stack without frame pointers (gcc -O2), {args.unwind_seconds} s "
             "at 99 Hz, one process, all three at once:",
             f"{'':52} {'fleetprof':>12} {'perf dwarf':>12} {'perf -g':>12}",
             f"{'BPF program run time per sample, ns':52} {uw['ns_per_run']:>12} {'-':>12} {'-':>12}",
             f"{'process CPU time, s':52} {uw['agent_cpu']:>12.3f} {uw['perf_cpu']['dwarf']:>12.3f} "
             f"{uw['perf_cpu']['fp']:>12.3f}",
             f"{'peak RSS, KiB':52} {uw['agent_rss_kb']:>12} {uw['perf_rss_kb']['dwarf']:>12} "
             f"{uw['perf_rss_kb']['fp']:>12}",
             f"{'RSS + BPF maps, table rows counted once, MiB':52} "
             f"{(uw['agent_rss_kb'] * 1024 + uw['map_bytes'] - uw['rows_bytes']) / 2**20:>12.2f} "
             f"{'-':>12} {'-':>12}",
             f"{'bytes per sample: wire steady state / perf.data':52} {uw['steady']:>12.2f} "
             f"{uw['perf_bytes']['dwarf']:>12.0f} {uw['perf_bytes']['fp']:>12.0f}",
             f"{'unwind table bytes sent to the agent, once':52} {uw['table_bytes']:>12} {'-':>12} {'-':>12}",
             f"whole stacks in the first 1 s intervals from the first sample: {', '.join(uw['whole'])}"]
    for name, (tb, eh, ms) in uw["files"].items():
        lines.append(f"table of {name}: {tb} bytes, {tb / eh:.2f}x its .eh_frame ({eh} bytes); "
                     f"fleetprof symbolize --unwind-table: {ms:.0f} ms, start-up included")
    return lines


def kernel_lines(args, kb):
    if kb is None:
        return ["Kernel-mode samples: redis-server or redis-benchmark missing (tools/install-deps.sh)"]
    r, u, d = kb["redis"], kb["redis-user-only"], kb["deep"]
    kstack = r["us"] - u["us"]
    kshare = kb["kernel_pct"] / 100
    row = lambda a, b, c="": f"{a:58} {b:>10} {c:>8}"
    return [f"Kernel-mode samples: redis-server under redis-benchmark ({kb['kernel_pct']:.0f}% of its samples in "
            f"the kernel, {kb['kframes']:.1f} kernel frames each) and deep (gcc -O2, 30 frames, user mode), "
            f"one agent -p on each at 99 Hz, side by side, {args.kernel_seconds} s after {args.kernel_warmup} s:",
            row("", "us/sample", "vs deep"),
            row("BPF time per sample, deep", f"{d['us']:.2f}", "1.00x"),
            row("BPF time per sample, redis-server (goal <= 1.5x deep)", f"{r['us']:.2f}", f"{r['us'] / d['us']:.2f}x"),
            row("  the same, --user-stacks-only", f"{u['us']:.2f}", f"{u['us'] / d['us']:.2f}x"),
            row("  its kernel stacks (the difference)", f"{kstack:.2f}", f"{kstack / d['us']:.2f}x"),
            f"  per sample taken in the kernel {kstack / max(kshare, 1e-9):.2f} us, "
            f"{kstack / max(kshare, 1e-9) / max(kb['kframes'], 1e-9):.2f} us per kernel frame "
            f"(the kernel's own stack walk, bpf_get_stack)",
            f"  (less the runs on other processes' ticks, {kb['filter_ns']:.0f} ns each, measured by an agent "
            f"-p on an idle process; with them: deep {d['gross_us']:.2f}, redis-server {r['gross_us']:.2f} us)",
            f"  walks to the root: redis-server {r['root_pct']:.0f}%, deep {d['root_pct']:.0f}%",
            row("agent CPU, % of one core: redis-server's agent (goal <= 0.05)", f"{r['cpu_pct']:.4f}"),
            row("  deep's agent", f"{d['cpu_pct']:.4f}")]


def python_lines(args, py):
    d, m, st = py["deep"], py["daemons"], py["deep"]["steady"]
    n = max(1, d["samples"])
    bpf_ns = d["runs"] * d["ns_per_run"] / n  # the runs on other CPUs' ticks too
    row = lambda a, b, c="-", r="": f"{a:52} {b:>12} {c:>12} {r:>8}"

    def per_sample(label, ours_s, ours_n, spy_s, spy_n):
        ours = bpf_ns / 1e3 + ours_s * 1e6 / ours_n if ours_n else float("nan")
        spy = spy_s * 1e6 / spy_n if d["spy"] and spy_n else float("nan")
        return row(label, f"{ours:.1f}", f"{spy:.1f}" if d["spy"] else "-",
                   f"{spy / ours:.1f}x" if spy == spy and ours == ours else "")
    lines = [f"Python ({args.python}, no frame pointers): a recursion 30 Python frames deep, "
             f"{args.python_seconds} s at 99 Hz, fleetprof and py-spy --nonblocking at once:",
             row("", "fleetprof", "py-spy", "ratio"),
             row("samples of the process", d["samples"], d["spy_samples"] if d["spy"] else "-"),
             row("BPF program run time per run, ns", d["ns_per_run"]),
             row("BPF program run time per sample of the process, ns", f"{bpf_ns:.0f}"),
             row("process CPU time, s", f"{d['agent_cpu']:.3f}", f"{d['spy_cpu']:.3f}" if d["spy"] else "-"),
             per_sample("CPU per sample, us (fleetprof: agent + BPF)", d["agent_cpu"], d["samples"],
                        d["spy_cpu"], d["spy_samples"]),
             per_sample(f"  the same, start-up excluded (last {st.get('window', 0):.0f} s)",
                        st.get("agent_s", 0), st.get("samples", 0), st.get("spy_s", 0),
                        st.get("spy_samples", 0)),
             row("Python frames per sample with a user stack walk", f"{d['py']['frames'] / max(1, d['walks']):.1f}"),
             row("  samples with a user stack walk, %", f"{100 * d['walks'] / n:.0f}"),
             row("Python frames in the hottest stack (symbolizer)", d["hot_py_frames"]),
             row("peak RSS, KiB", d["agent_rss_kb"]),
             row("wire bytes/sample, steady state", f"{d['steady_wire']:.2f}"),
             f"  agent's python counters: {python_counter_text(d['py'])}",
             "", f"Ten Python daemons (pydaemon.py 0-9, ~6% of a core each), the agent at 99 Hz, "
             f"10 s intervals, {args.daemon_seconds} s, all processes; steady state: the last "
             f"{m['steady_s']:.0f} s:",
             row(f"samples taken (% in {os.path.basename(args.python)})", f"{m['samples']} ({m['share']:.0f}%)"),
             row("agent CPU, % of one core, whole run", f"{100 * m['agent_cpu'] / m['elapsed']:.3f}"),
             row("agent CPU, % of one core, steady state", f"{100 * m['steady_cpu_s'] / m['steady_s']:.3f}"),
             row("BPF program run time per run, ns", m["ns_per_run"]),
             row("peak RSS (VmHWM), KiB", m["rss_kb"]),
             row("heap and private memory (peak RssAnon), KiB", m["anon_kb"]),
             row("BPF map memory, KiB", m["map_bytes"] // 1024),
             row("wire bytes/sample, steady state (goal <= 2)", f"{m['steady']:.2f}"),
             row(f"  a second agent with -p on the ten daemons, {args.daemon_only_seconds} s, "
                 f"the last {args.daemon_only_steady} s", f"{m['only']:.2f}"),
             "  the same per minute: " + ", ".join(f"{x:.2f}" for x in m["only_minutes"]),
             row("wire bytes/sample, whole run (excl. kallsyms)", f"{m['all']:.2f}"),
             row("stack-trie nodes at exit, all processes", m["trie"][0]),
             "  native user frames {1}, kernel {2}, Python {3}".format(*m["trie"]),
             row("process_vm_readv calls/s to the daemons (goal 0)", f"{m['readv_per_s']:.2f}"),
             row("  to other processes of the host", f"{m['readv_other_per_s']:.2f}"),
             "  process_vm_readv calls/s to the daemons per 10 s from the agent's start: "
             + ", ".join(f"{x:.1f}" for x in m["readv_per_10s"]),
             row("code objects read, whole run", m["py"]["code_reads"]),
             f"  agent's python counters: {python_counter_text(m['py'])}"]
    return lines


def whole_share(out_dir, process, first):
    """Per interval (folded file, in order) the (whole, samples) of
    process's samples whose outermost frame is _start or clone3 (glibc's
    names), and the share of them from the first-th interval on."""
    roots = {"_start", "clone3", "__clone3", "__GI___clone3"}
    files = sorted(glob.glob(f"{out_dir}/*/*.folded"),
                   key=lambda p: int(re.search(r"-(\d+)\.folded$", p).group(1)))
    per = []
    for path in files:
        whole = total = 0
        for line in open(path):
            stack, _, n = line.rstrip().rpartition(" ")
            frames = [f for f in stack.split(";") if not f.endswith("_[i]")]
            if frames[0] == process:
                total += int(n)
                whole += int(n) if len(frames) > 1 and frames[1] in roots else 0
        per.append((whole, total))
    w, t = sum(x[0] for x in per[first - 1:]), sum(x[1] for x in per[first - 1:])
    return per, 100.0 * w / t if t else float("nan")


def fleetpath_run(args, d, local_files):
    """redis-server under redis-benchmark, the agent (-i 2) on it, a fresh
    symbolizer: how many of redis's stacks are whole, per interval."""
    symb = Symbolizer(args.build, d, local_files)
    port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    bench = None
    try:
        for _ in range(50):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-q", "-n", "100000000", "-c", "20"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agent = start_agent(args.build, symb.addr, 99, 2, redis.pid)
        time.sleep(args.fleetpath_seconds)
        _, log = stop_agent(agent)
    finally:
        for p in (bench, redis):
            if p:
                p.kill()
                p.wait()
        symb.stop()
    per, share = whole_share(f"{d}/out", "redis-server", 3)
    walks = re.search(r"stack walks: (\d+), (\d+) to the root", log)
    return {"per": per, "share": share, "walks": tuple(int(x) for x in walks.groups()) if walks else (0, 0)}


def fleetpath_bench(args, tmp):
    """The fleet path as deployed, then, as the reference, a symbolizer
    that reads the device's files itself (--local-files)."""
    return {"deployed": fleetpath_run(args, f"{tmp}/fleetpath", False),
            "local": fleetpath_run(args, f"{tmp}/fleetpath-local", True)}


def fleetpath_lines(args, fl):
    lines = [f"The fleet path: redis-server under redis-benchmark, agent -i 2, {args.fleetpath_seconds} s, "
             "a fresh symbolizer each (libc's symbols from /usr/lib/debug)",
             f"{'':44} {'whole from interval 3':>22} {'walks to the root':>18}  per interval"]
    for name, key in (("as deployed (CFI from the device)", "deployed"),
                      ("--local-files (reference)", "local")):
        r = fl[key]
        per = ", ".join(f"{100 * w // t}%" if t else "-" for w, t in r["per"])
        lines.append(f"{name:44} {r['share']:>21.1f}% {r['walks'][1]:>8} of {r['walks'][0]:<7}  {per}")
    return lines


LIBRBD = "/usr/lib/x86_64-linux-gnu/librbd.so.1"


def proc_status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def loadgen_summary(out):
    line = [l for l in out.splitlines() if l.startswith("loadgen: ")][-1]
    return {k: v for k, v in (f.split("=") for f in line.split()[1:])}


def fleet_run(args, tmp, name, devices, seconds, interval, extra=()):
    """One symbolizer (fresh cache and output) under `fleetprof loadgen`."""
    d = f"{tmp}/fleet-{name}"
    symb = Symbolizer(args.build, d, local_files=True)
    idle_kb = proc_status(symb.proc.pid, "RssAnon")
    cpu0 = cpu_ns(symb.proc.pid)
    t0 = time.monotonic()
    lg = subprocess.Popen([f"{args.build}/fleetprof", "loadgen", "--server", symb.addr,
                           "--devices", str(devices), "--seconds", str(seconds),
                           "--interval", str(interval), *extra],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    resolved_at = None
    while lg.poll() is None:
        if extra and resolved_at is None and any(
                "librbd::" in open(f).read()
                for f in glob.glob(f"{d}/out/loadgen-00000/*.folded")):
            resolved_at = time.monotonic() - t0
        time.sleep(0.1)
    out = lg.stdout.read()
    cpu_s = (cpu_ns(symb.proc.pid) - cpu0) / 1e9
    rss_kb = proc_status(symb.proc.pid, "RssAnon")
    symb.stop()
    s = loadgen_summary(out)
    resolved = 0
    for f in glob.glob(f"{d}/out/loadgen-*/*.folded"):
        with open(f) as fh:
            resolved += sum(int(l.rsplit(" ", 1)[1]) for l in fh if l.strip())
    return {"s": s, "cpu_s": cpu_s, "resolved": resolved, "idle_kb": idle_kb,
            "rss_kb": rss_kb, "resolved_at": resolved_at}


def fleet_bench(args, tmp):
    # The symbolizer holds a connection per device and does not raise its
    # own limit of open files: give it (by inheritance) the hard limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runs = {}
    for devices, seconds in ((1000, 30), (10000, 45)):
        runs[devices] = fleet_run(args, tmp, str(devices), devices, seconds, 10)
    big = None
    if os.path.exists(LIBRBD):
        big = fleet_run(args, tmp, "big", 51, 20, 1, ("--map-file", LIBRBD, "--timeout", "10"))
    return runs, big


def fleet_lines(fl):
    runs, big = fl
    lines = ["Fleet: simulated devices (fleetprof loadgen), 200 samples/s each, a batch every "
             "10 s, against one symbolizer",
             f"{'devices':>8} {'accepted/s':>11} {'resolved/s':>11} {'symb CPU s':>10} "
             f"{'per CPU s':>10} {'p50 ms':>8} {'p99 ms':>9} {'max ms':>9} {'timeouts':>8} "
             f"{'need-hello':>10} {'kB/session':>10}"]
    for devices, r in runs.items():
        s, secs = r["s"], float(r["s"]["seconds"])
        sessions = min(devices, 4096)
        lines.append(
            f"{devices:>8} {float(s['accepted_per_s']):>11.0f} {r['resolved'] / secs:>11.0f} "
            f"{r['cpu_s']:>10.1f} {int(s['accepted']) / max(r['cpu_s'], 1e-9):>10.0f} "
            f"{float(s['p50_ms']):>8.1f} {float(s['p99_ms']):>9.1f} {float(s['max_ms']):>9.1f} "
            f"{s['timeouts']:>8} {s['need_hello']:>10} "
            f"{(r['rss_kb'] - r['idle_kb']) / sessions:>10.1f}")
    lines.append("(per CPU s: samples accepted per CPU second of the symbolizer, goal >= 1 M; "
                 "kB/session: its anonymous RSS at the end less at start, per session kept)")
    if big is None:
        lines.append(f"{LIBRBD} missing (librbd1-dbg): no ingest figures")
        return lines
    s = big["s"]
    first = "none" if big["resolved_at"] is None else f"{big['resolved_at'] - 1:.1f} s"
    lines.append(f"50 devices, a batch every second, while librbd's 137 MB debug file is ingested: "
                 f"reply p99 {float(s['p99_ms']):.1f} ms (goal < 50), max {float(s['max_ms']):.1f} ms, "
                 f"timeouts (10 s) {s['timeouts']}")
    lines.append(f"time to first resolved interval for the new build-ID: {first} "
                 f"(its batch accepted after {s.get('map_file_ms', 'none')} ms)")
    return lines


def tables_fleet(args, tmp, name, extra, runs):
    """loadgen --warm: 1,000 devices whose files have tables the symbolizer
    compiled before they start (it reads them: --local-files), `runs`
    times; each run's summary."""
    out = []
    for i in range(runs):
        d = f"{tmp}/tables-{name}-{i}"
        symb = Symbolizer(args.build, d)
        lg = subprocess.run([f"{args.build}/fleetprof", "loadgen", "--server", symb.addr,
                             "--devices", "1000", "--seconds", "30", "--warm", *extra],
                            capture_output=True, text=True)
        symb.stop()
        if "loadgen: devices=" not in lg.stdout:
            sys.exit(f"bench: loadgen failed: {lg.stderr.strip()}")
        out.append(loadgen_summary(lg.stdout))
    return out


def restart_whole(out_dir):
    """(whole, total) redis-server samples of a phase: whole when the stack
    reaches _start or a thread's clone."""
    whole = total = 0
    for path in glob.glob(f"{out_dir}/*/*.folded"):
        for line in open(path):
            stack, _, n = line.rstrip().rpartition(" ")
            if stack.startswith("redis-server;"):
                total += int(n)
                if re.search(r";(_start|[^;]*clone3?);", stack):
                    whole += int(n)
    return whole, total


def tables_restart(args, tmp):
    """An agent restarted against a symbolizer that has redis-server's
    tables (in its cache, filled by a first session with --local-files;
    the later ones run without, as deployed): the share of whole stacks in
    its first 2 s of sampling and the table bytes it received, with its
    table cache off, then on (a first run writes it)."""
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        return None
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--save", "", "--appendonly",
                              "no", "--io-threads", "2", "--io-threads-do-reads", "yes", "--dir",
                              tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    bench = subprocess.Popen(["redis-benchmark", "-p", str(rport), "-q", "-l", "-c", "20", "-P",
                              "4", "-d", "64", "--threads", "2", "-t", "set,get,incr,lpush"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    addr = f"tcp://127.0.0.1:{free_port()}"
    res = {}
    try:
        for phase, local, secs, extra in (
                ("warm", True, 6, ("--table-cache-mb", "0")),
                ("off", False, 2, ("--table-cache-mb", "0")),
                ("fill", False, 3, ("--table-cache", f"{tmp}/agent-tables")),
                ("on", False, 2, ("--table-cache", f"{tmp}/agent-tables"))):
            symb = subprocess.Popen(
                [f"{args.build}/fleetprof-symbolizer", *(["--local-files"] if local else []),
                 "--listen", addr, "--cache", f"{tmp}/restart-cache", "--out",
                 f"{tmp}/restart-{phase}"], stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            agent = start_agent(args.build, addr, 299, 1, redis.pid, extra)
            log = []
            for line in agent.stderr:  # its first sample comes after this line
                log.append(line)
                if "sampling at" in line:
                    break
            time.sleep(secs)
            _, rest = stop_agent(agent)
            log = "".join(log) + rest
            symb.send_signal(signal.SIGTERM)
            symb.wait()
            got = re.search(r"(\d+) bytes of unwind tables", log)
            cached = re.search(r"(\d+) tables installed from it", log)
            res[phase] = {"whole": restart_whole(f"{tmp}/restart-{phase}"),
                          "received": int(got.group(1)) if got else -1,
                          "from_cache": int(cached.group(1)) if cached else 0}
    finally:
        bench.kill()
        redis.kill()
        bench.wait()
        redis.wait()
    return res


def tables_bench(args, tmp):
    """Table traffic at fleet scale (issue 17): loadgen devices that take
    their tables and devices whose hellos say they hold them, three runs
    each in turn; and an agent restart with its table cache off and on."""
    fleet = {"take": [], "hold": []}
    for _ in range(3):
        fleet["take"] += tables_fleet(args, tmp, "take", (), 1)
        fleet["hold"] += tables_fleet(args, tmp, "hold", ("--hold-tables",), 1)
    return {"fleet": fleet, "restart": tables_restart(args, tmp)}


def tables_lines(tb):
    lines = ["Unwind tables at fleet scale: 1,000 loadgen devices, their files' tables compiled "
             "before they start (--warm), connecting at once, 30 s, three runs each in turn"]
    lines.append(f"{'devices':<34} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'timeouts':>8} "
                 f"{'table bytes/session':>20}")
    for name, label in (("take", "take their tables"), ("hold", "hold them (--hold-tables)")):
        for s in tb["fleet"][name]:
            per = int(s["table_bytes"]) / max(int(s["hellos"]), 1)
            lines.append(f"{label:<34} {float(s['p50_ms']):>8.1f} {float(s['p99_ms']):>8.1f} "
                         f"{float(s['max_ms']):>8.1f} {s['timeouts']:>8} {per:>20.0f}")
    lines.append("(goal: p99 < 100 ms; a device that holds its tables is sent none)")
    r = tb["restart"]
    if r is None:
        lines.append("redis-server missing: no agent restart figures")
        return lines
    for phase, label in (("off", "table cache off"), ("on", "table cache on")):
        w, t = r[phase]["whole"]
        lines.append(f"agent restarted, {label}: {w} of {t} redis-server stacks whole in its first "
                     f"2 s ({100 * w / max(t, 1):.1f}%, goal >= 95%), {r[phase]['received']} bytes "
                     f"of unwind tables received, {r[phase]['from_cache']} tables from its cache")
    return lines


def python_counter_text(c):
    return (f"{c['procs']} processes, frames {c['frames']}, thread state not found "
            f"{c['no_thread']}, stacks disagreed {c['mismatch']}, unreadable mid-walk "
            f"{c['read_err']}; code objects read {c['code_reads']} ({c['code_stale']} reused, "
            f"{c['code_errors']} unreadable), {c['bytes_read']} bytes; sessions the symbolizer "
            f"lost: {c['rehello']}")

# Device: start-up and memory of the agent on a busy host, as deployed.

def smaps_split(pid):
    """(RSS without BPF maps, its anonymous part, its file part, RSS of
    BPF map mappings), kB, from /proc/PID/smaps: mapped BPF maps are
    counted with the maps, once."""
    rss = anon = bpf = 0
    name = ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split(None, 5)
                name = parts[5].strip() if len(parts) > 5 else ""
            elif line.startswith("Rss:"):
                kb = int(line.split()[1])
                if name.startswith("anon_inode:bpf-map"):
                    bpf += kb
                else:
                    rss += kb
            elif line.startswith("Anonymous:") and not name.startswith("anon_inode:bpf-map"):
                anon += int(line.split()[1])
    return rss, anon, rss - anon, bpf


class SmapsPeak(threading.Thread):
    """The peak of smaps_split(pid)[0] (and its split) while pid lives."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak = pid, (0, 0, 0, 0)
        self.start()

    def run(self):
        while True:
            try:
                now = smaps_split(self.pid)
            except (OSError, ValueError):
                return
            if now[0] > self.peak[0]:
                self.peak = now
            time.sleep(0.5)


def agent_maps(pid):
    """[(name, type, bytes)] of the BPF maps agent pid holds open, the
    kernel's figures (fdinfo memlock, bpftool for the names)."""
    out = []
    for fdinfo in glob.glob(f"/proc/{pid}/fdinfo/*"):
        try:
            info = dict(l.split(":", 1) for l in open(fdinfo) if ":" in l)
        except OSError:
            continue
        if "map_id" not in info:
            continue
        mid = int(info["map_id"])
        show = subprocess.run(["bpftool", "-j", "map", "show", "id", str(mid)],
                              capture_output=True, text=True).stdout
        name = json.loads(show).get("name", "?") if show else "?"
        out.append((mid, name, int(info["memlock"])))
    return sorted({m[0]: m for m in out}.values(), key=lambda m: -m[2])


def first_sample(agent, timeout=15):
    """Read the agent's log until its start-up line; the line, or None."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = agent.stderr.readline()
        if not line:
            return None
        if "start-up: first sample" in line:
            return line
    return None


def start_up_figures(line):
    m = re.search(r"first sample after ([\d.]+) ms of CPU .* loaded in ([\d.]+) ms of CPU, "
                  r"about ([\d.]+) ms of it verifying (\d+)", line or "")
    return tuple(float(x) for x in m.groups()) if m else None


def device_run(args, addr, secs, tables, pids=None):
    """One agent for secs, on the whole host or on pids: its memory, BPF
    cost and log figures.  Its table cache is the empty directory tables,
    on disk as deployed (large tables wait there until a walk needs
    them)."""
    agent = start_agent(args.build, addr, 99, 5, pids, extra=("--table-cache", tables))
    rss, hwm = SmapsPeak(agent.pid), PeakRss(agent.pid)
    time.sleep(secs)
    maps = agent_maps(agent.pid)
    agent_cpu, log = stop_agent(agent)
    runs, ns_per_run, map_bytes = bpf_figures(log)
    um = re.search(r"unwind memory: (\d+) chunks of rows, (\d+) bytes, for (\d+) rows of (\d+) "
                   r"tables \(budget (\d+) rows\); (\d+) process lists of (\d+) mappings", log)
    rb = re.search(r"ring buffer: (\d+) bytes; (\d+) records of (\d+) bytes on average; "
                   r"at most (\d+) bytes drained at once", log)
    py = re.search(r"Python walker loaded: ([\d.]+) ms of CPU, (\d+) instructions", log)
    kept = re.search(r"(\d+) kept for when a walk needs them, (\d+) installed so", log)
    return {"kept": kept.groups() if kept else None, "rss": rss.peak, "hwm": hwm.kib, "maps": maps, "map_bytes": map_bytes,
            "rows_mapped": rows_mapped(log), "ns_per_run": ns_per_run, "runs": runs,
            "unwind": [int(x) for x in um.groups()] if um else None,
            "ring": [int(x) for x in rb.groups()] if rb else None,
            "py": py.groups() if py else None, "agent_cpu": agent_cpu}


def device_bench(args, tmp):
    d = f"{tmp}/device"
    os.makedirs(d)
    addr = f"tcp://127.0.0.1:{free_port()}"
    port = free_port()
    secs = args.device_seconds
    procs = []
    symb = subprocess.Popen([f"{args.build}/fleetprof-symbolizer", "--listen", addr, "--cache",
                             f"{d}/cache", "--out", f"{d}/out"], stderr=subprocess.DEVNULL)
    try:
        procs.append(subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL))
        time.sleep(0.5)
        procs.append(subprocess.Popen(["redis-benchmark", "-p", str(port), "-q", "-c", "4",
                                       "-n", "1000000000", "-t", "set,get", "-l"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([args.python, "tests/workload/pywork.py"],
                                      stdout=subprocess.DEVNULL))
        procs.append(subprocess.Popen([args.workload], stdout=subprocess.DEVNULL))
        time.sleep(2)
        bpf_stats(True)
        # Start-ups: each agent stopped at its first sample.
        starts = []
        for _ in range(args.device_starts):
            agent = start_agent(args.build, addr, 99, 5)
            starts.append(start_up_figures(first_sample(agent)))
            stop_agent(agent)
        # The whole host, as asked; then the workloads alone (-p), which
        # a host busy with other work (a shared VM) leaves as it is.
        host = device_run(args, addr, secs, f"{d}/tables-host")
        alone = device_run(args, addr, secs, f"{d}/tables-alone", [p.pid for p in procs])
    finally:
        bpf_stats(False)
        for p in procs:
            p.kill()
            p.wait()
        symb.send_signal(signal.SIGTERM)
        symb.wait()
    return {"starts": [x for x in starts if x], "host": host, "alone": alone, "secs": secs}


def device_lines(args, dv):
    lines = [f"Device: the agent (99 Hz) on a host running redis-server under redis-benchmark, "
             f"python3.11 (pywork.py) and the frame-pointer workload, against the symbolizer "
             f"without --local-files, {dv['secs']} s each: on the whole host, then on the four "
             f"workload processes only (-p)"]
    st = sorted(dv["starts"], key=lambda x: x[0])
    if st:
        mid = st[len(st) // 2]
        lines.append(
            f"start-up, agent CPU from exec to its first sample, ms ({len(st)} starts): median "
            f"{mid[0]:.1f} (min {st[0][0]:.1f}, max {st[-1][0]:.1f}; goal <= 50); of it loading "
            f"BPF {mid[1]:.1f}, verifying about {mid[2]:.1f} ({100 * mid[2] / mid[0]:.0f}%, "
            f"{mid[3]:.0f} instructions)")
    py = dv["host"]["py"] or dv["alone"]["py"]
    if py:
        lines.append(f"Python walker, loaded when the first CPython process was seen: "
                     f"{float(py[0]):.1f} ms of CPU, {py[1]} instructions verified")
    lines.append(f"{'':58} {'whole host':>12} {'-p workloads':>13}")
    row = lambda name, f: lines.append(f"{name:58} {f(dv['host']):>12} {f(dv['alone']):>13}")
    mib = lambda r: f"{(r['rss'][0] * 1024 + r['map_bytes']) / 2**20:.2f}"
    row("RSS without mapped BPF maps + BPF maps, MiB (goal 7.63)", mib)
    row("  peak RSS without mapped BPF maps, KiB", lambda r: r["rss"][0])
    row("    anonymous, KiB", lambda r: r["rss"][1])
    row("    files (binary, libraries), KiB", lambda r: r["rss"][2])
    row("  (VmHWM, mapped BPF maps and moments between samples in, KiB)", lambda r: r["hwm"])
    row("  BPF maps (the kernel's count), KiB", lambda r: r["map_bytes"] // 1024)
    row("    chunks of unwind rows, KiB", lambda r: r["rows_mapped"] // 1024)
    row("    the other maps, KiB", lambda r: (r["map_bytes"] - r["rows_mapped"]) // 1024)
    row("unwind rows in use", lambda r: r["unwind"][2] if r["unwind"] else "-")
    row("  of tables", lambda r: r["unwind"][3] if r["unwind"] else "-")
    row("  chunks held", lambda r: r["unwind"][0] if r["unwind"] else "-")
    row("  tables kept on disk until a walk needs them / installed so",
        lambda r: f"{r['kept'][0]}/{r['kept'][1]}" if r["kept"] else "-")
    row("process lists / their mappings",
        lambda r: f"{r['unwind'][5]}/{r['unwind'][6]}" if r["unwind"] else "-")
    row("ring buffer: records, mean bytes", lambda r: f"{r['ring'][1]}, {r['ring'][2]}"
        if r["ring"] else "-")
    row("  the most drained at once, KiB (of the buffer's)",
        lambda r: f"{r['ring'][3] // 1024} of {r['ring'][0] // 1024}" if r["ring"] else "-")
    row("BPF program run time per run, ns", lambda r: r["ns_per_run"])
    row("agent CPU, % of a core (start-up included)",
        lambda r: f"{100 * r['agent_cpu'] / dv['secs']:.3f}")
    other = dv["host"]["maps"]
    lines.append("the host agent's maps, KiB: " +
                 ", ".join(f"{n} {b // 1024}" for _, n, b in other if b >= 4096))
    return lines


def storm_round(args, d, mode, symb):
    """A context-switch storm (tests/workload/storm.c, one pair) for
    args.offcpu_seconds under mode: None, "agent" (fleetprof-agent
    --off-cpu on the whole host, its defaults otherwise) or "offcputime"
    (libbpf-tools, the whole host).  {passes/s, and for the agent its CPU
    seconds, log and peak RSS}."""
    secs = args.offcpu_seconds
    prof, rss = None, None
    if mode == "agent":
        prof = start_agent(args.build, symb.addr, 99, 10, extra=("--table-cache-mb", "0", "--off-cpu"))
        rss = PeakRss(prof.pid)
        # loaded and attached, its first tables in, its Python walkers
        # loaded (bench.py is a CPython process): steady state
        time.sleep(5)
    elif mode == "offcputime":
        prof = subprocess.Popen(["/usr/sbin/offcputime", str(secs + 4)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(2)
    cpu0 = cpu_ns(prof.pid) if mode == "agent" else 0
    # On one CPU: every pass is two context switches there, and the rate
    # does not depend on where the scheduler puts the pair.
    out = subprocess.run(["taskset", "-c", "0", f"{d}/storm", str(secs)], capture_output=True,
                         text=True, check=True)
    r = {"rate": float(re.search(r"per_second (\d+)", out.stdout).group(1))}
    if mode == "agent":
        r["steady_cpu"] = (cpu_ns(prof.pid) - cpu0) / 1e9
        r["cpu"], r["log"] = stop_agent(prof)
        r["rss"] = rss.kib
    elif prof:
        prof.kill()
        prof.wait()
    return r


def offcpu_bench(args, tmp):
    d = f"{tmp}/offcpu"
    os.makedirs(d)
    for src in ("storm", "waitwork"):
        subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-pthread",
                        f"tests/workload/{src}.c", "-o", f"{d}/{src}"], check=True)
    symb = Symbolizer(args.build, d)
    bpf_stats(True)
    runs = {None: [], "agent": [], "offcputime": []}
    try:
        for _ in range(args.rounds):  # interleaved: the VM's speed drifts
            for mode in runs:
                runs[mode].append(storm_round(args, d, mode, symb))
        # Shares under the storm: waitwork profiled by `fleetprof record
        # --off-cpu` on the whole host (the storm sets its share of stacks
        # taken) and by offcputime -p, at once.
        secs = args.offcpu_seconds
        storm = subprocess.Popen([f"{d}/storm", str(secs + 6)], stdout=subprocess.DEVNULL)
        work = subprocess.Popen([f"{d}/waitwork", str(secs + 6)])
        time.sleep(1)
        oracle = subprocess.Popen(["/usr/sbin/offcputime", "-p", str(work.pid), str(secs)],
                                  stdout=open(f"{d}/offcputime.txt", "w"), stderr=subprocess.DEVNULL)
        rec = subprocess.run([f"{args.build}/fleetprof", "record", "--off-cpu", "--by-thread",
                              "-d", str(secs), "-o", f"{d}/rec", "--cache", f"{d}/rcache"],
                             capture_output=True, text=True)
        oracle.wait()
        cmp = subprocess.run(["python3", "tests/e2e/offcpu_compare.py", "--process", "waitwork",
                              f"{d}/rec/offcpu.folded", f"{d}/offcputime.txt",
                              "pipe_read|anon_pipe_read", "do_nanosleep", "do_sys_poll"],
                             capture_output=True, text=True)
        for p in (storm, work):
            p.wait()
    finally:
        bpf_stats(False)
        symb.stop()
    return {"runs": runs, "record": rec.stdout, "compare": cmp.stdout, "compare_ok": cmp.returncode == 0,
            "secs": args.offcpu_seconds}


def offcpu_lines(args, oc):
    med = lambda xs: sorted(xs)[len(xs) // 2]
    base = med([r["rate"] for r in oc["runs"][None]])
    lines = [f"Off-CPU: a context-switch storm (tests/workload/storm.c: two threads passing a byte "
             f"through pipes on CPU 0, each pass two waits), {oc['secs']} s a run, {args.rounds} rounds "
             f"interleaved; fleetprof-agent --off-cpu on the whole host at its defaults (99 Hz, "
             f"{100} stacks of waits a second per CPU), offcputime (libbpf-tools) on the whole host"]
    lines.append(f"{'':52} {'passes/s':>10} {'of none':>8}")
    for mode, name in ((None, "no profiler"), ("agent", "fleetprof-agent --off-cpu"),
                       ("offcputime", "offcputime")):
        rate = med([r["rate"] for r in oc["runs"][mode]])
        lines.append(f"{name:52} {rate:10.0f} {100 * rate / base:7.1f}%")
    ag = oc["runs"]["agent"]
    cpu = med([r["steady_cpu"] for r in ag])
    switches = 2 * med([r["rate"] for r in ag])
    lines.append(f"agent CPU during the storm ({switches:.0f} switches/s on CPU 0), % of a core: "
                 f"{100 * cpu / oc['secs']:.2f} (goal < 1); with its start-up "
                 f"{100 * med([r['cpu'] for r in ag]) / (oc['secs'] + 5):.2f}; "
                 f"peak RSS {max(r['rss'] for r in ag)} KiB")
    log = ag[len(ag) // 2]["log"]
    m = re.search(r"off-CPU: (.*)", log)
    if m:
        lines.append(f"agent's counters (median run): {m.group(1)}")
    lost = re.search(r"sampled \d+ samples.*", log)
    if lost:
        lines.append(f"agent: {lost.group(0)}")
    lines.append("Shares under the storm: waitwork (a thread waiting on a pipe 70% of its time, one "
                 "sleeping 30%, one in poll, one burning at nice 19) by `fleetprof record --off-cpu` "
                 "on the whole host and by offcputime -p at once")
    lines += [l for l in oc["compare"].splitlines()]
    lines.append("within 5 points and 10%: " + ("yes" if oc["compare_ok"] else "NO"))
    m = re.search(r"off-CPU: .*", oc["record"])
    if m:
        lines.append(f"record's counters: {m.group(0).split(' -> ')[0]}")
    return lines


PARTS = ("footprint", "symbolizer", "unwind", "kernel", "encode", "python", "fleet", "fleetpath",
         "tables", "device", "offcpu")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--throughput-seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--unwind-seconds", type=int, default=20)
    ap.add_argument("--kernel-seconds", type=int, default=30)
    ap.add_argument("--kernel-warmup", type=int, default=45)
    ap.add_argument("--python", default="/usr/bin/python3.11",
                    help="the interpreter of the Python part (default: Debian's python3.11)")
    ap.add_argument("--python-seconds", type=int, default=20)
    ap.add_argument("--daemon-seconds", type=int, default=60)
    ap.add_argument("--daemon-only-seconds", type=int, default=600)
    ap.add_argument("--daemon-only-steady", type=int, default=180)
    ap.add_argument("--fleetpath-seconds", type=int, default=20)
    ap.add_argument("--device-seconds", type=int, default=30)
    ap.add_argument("--device-starts", type=int, default=7)
    ap.add_argument("--offcpu-seconds", type=int, default=10)
    ap.add_argument("--only", default=",".join(PARTS),
                    help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    args = ap.parse_args()
    only = args.only.split(",")
    if not set(only) <= set(PARTS):
        ap.error(f"--only: parts are {', '.join(PARTS)}")
    args.workload = f"{args.build}/tests/workload"
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF and perf -a)")
    sections = []
    with tempfile.TemporaryDirectory(prefix="fleetprof-bench.") as tmp:
        if "footprint" in only:
            fp = footprint(args, tmp)
            sections.append(footprint_lines(args, fp, throughput(args, tmp)))
        if "symbolizer" in only:
            sections.append(symbolizer_lines(symbolizer_bench(args, tmp)))
        if "encode" in only:
            sections.append(encode_lines(dict(l.split("=") for l in subprocess.run(
                [f"{args.build}/bench/encode_bench"], capture_output=True, text=True).stdout.split())))
        if "unwind" in only:
            sections.append(unwind_lines(args, unwind_bench(args, tmp)))
        if "kernel" in only:
            sections.append(kernel_lines(args, kernel_bench(args, tmp)))
        if "python" in only:
            sections.append(python_lines(args, python_bench(args, tmp)))
        if "fleet" in only:
            sections.append(fleet_lines(fleet_bench(args, tmp)))
        if "fleetpath" in only:
            sections.append(fleetpath_lines(args, fleetpath_bench(args, tmp)))
        if "tables" in only:
            sections.append(tables_lines(tables_bench(args, tmp)))
        if "device" in only:
            sections.append(device_lines(args, device_bench(args, tmp)))
        if "offcpu" in only:
            sections.append(offcpu_lines(args, offcpu_bench(args, tmp)))
    text = "\n\n".join("\n".join(s) for s in sections)
    print(text)
    with open(f"{args.build}/bench.txt", "w") as f:
        f.write(text + "\n")

if __name__ == "__main__":
    main()
