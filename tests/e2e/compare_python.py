#!/usr/bin/env python3
"""compare_python.py OURS.raw SPY.raw: fleetprof's Python frames against
py-spy's, sampled from the same process over the same seconds.

OURS.raw is `go tool pprof -raw` of fleetprof's profile.pb.gz: every sample
with its stack (leaf first) and each location's function and file:line.
SPY.raw is `py-spy record -f raw`: one line per stack, root first,
"function (file:line);... count".

Checks, each printed as a PASS:/FAIL: line with the numbers:
  coverage  at least --min-coverage of fleetprof's samples of the process
            carry Python frames (the walk found them);
  thread-split  (with --cpu) each thread's share of fleetprof's samples is
            within 5 points of its share of the process's CPU time, as the
            kernel accounts it (/proc/PID/task/TID/schedstat), or within 4
            standard deviations of a share estimated from that many samples
            when that is wider (a starved process: on a busy host py-spy's
            stops take most of its CPU time; 500 samples of a thread with a
            third of it allow 8.5 points).  Wrong threads still fail:
            pywork's two threads have a third to a half of the CPU time
            each, so samples all put on one thread (or on the process's
            main thread) are 33 to 50 points off, and two threads swapped
            when they do not split it evenly;
  shares    within each thread (told apart by its outermost Python
            function), every Python function on at least 5% of py-spy's
            samples of the thread has an inclusive share in fleetprof's
            within 5 points of py-spy's.  Per thread, because py-spy counts
            a thread that waits for the GIL as running at times, and so
            weighs the threads up to 10 points apart from their CPU time;
  lines     for the hottest innermost Python frames of py-spy (the top
            three, each on at least 5% of its samples), fleetprof's most
            frequent line of that function is the same line.
With --generated, OURS only: tests/workload/pyreuse.py's functions gen_K
must be named on their own lines (K + 2 to K + 5): a code object freed and
its memory reused must never lend its name to another.
Shares are of the samples that have Python frames, in each tool.
"""
import argparse
import collections
import re
import sys

SPY_FRAME = re.compile(r'^(.*) \((.*):(\d+)\)$')


def parse_ours(path, with_tids=False):
    """[(count, [(function, file, line), ...] innermost first)], all samples;
    with_tids, also the thread id of each."""
    samples, locs, section = [], {}, None
    with open(path) as f:
        for line in f:
            if line.startswith('Samples:'):
                section = 'samples'
                continue
            if line.startswith('Locations'):
                section, cur = 'locations', None
                continue
            if line.startswith('Mappings'):
                section = None
                continue
            if section == 'samples':
                m = re.match(r'^\s+(\d+)\s+\d+: ([\d ]+)$', line.rstrip('\n'))
                if m:
                    samples.append([int(m.group(1)), [int(x) for x in m.group(2).split()], None])
                t = re.search(r'\btid:\[(\d+)\]', line)
                if t and samples:
                    samples[-1][2] = int(t.group(1))
            elif section == 'locations':
                m = re.match(r'^\s+(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(.*)$', line.rstrip('\n'))
                if m:
                    cur = int(m.group(1))
                    locs[cur] = [m.group(2)]
                elif cur is not None and line.strip():
                    locs[cur].append(line.strip())  # inlined functions
    out, tids = [], []
    for count, ids, tid in samples:
        tids.append(tid)
        frames = []
        for i in ids:
            # the outermost function of the location; inlined ones first
            for text in reversed(locs.get(i, [])):
                # "function file:line[:column] s=start"; pprof prints a
                # name in angle brackets after it: "file:line s=1(<module>)"
                m = re.match(r'^(.*?) ?([^:\s]*):(\d+)(?::\d+)? s=\d+(?:\((.*)\))?$', text)
                if m:
                    frames.append((m.group(1) or m.group(4) or '', m.group(2), int(m.group(3))))
        out.append((count, frames))
    return (out, tids) if with_tids else out


def parse_spy(path):
    """[(count, [(function, file, line), ...] innermost first)]."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            stack, _, count = line.rpartition(' ')
            frames = []
            for part in stack.split(';'):
                m = SPY_FRAME.match(part)
                if m:
                    frames.append((m.group(1), m.group(2), int(m.group(3))))
            frames.reverse()
            out.append((int(count), frames))
    return out


def is_python(frame):
    return frame[1].endswith('.py')


def inclusive(samples):
    """function -> share of the samples with Python frames; that total."""
    incl, total = collections.Counter(), 0
    for count, frames in samples:
        names = {f[0] for f in frames if is_python(f)}
        if not names:
            continue
        total += count
        for n in names:
            incl[n] += count
    return {n: c / total for n, c in incl.items()}, total


def thread_of(frames):
    """A thread's identity both tools see: its outermost Python function
    (<module> for the main thread, the threading bootstrap for others)."""
    py = [f[0] for f in frames if is_python(f)]
    return py[-1] if py else None


def by_thread(samples):
    """thread -> its samples."""
    groups = collections.defaultdict(list)
    for count, frames in samples:
        t = thread_of(frames)
        if t:
            groups[t].append((count, frames))
    return groups


def innermost_lines(samples):
    """(function, line) -> samples where it is the innermost Python frame."""
    c = collections.Counter()
    for count, frames in samples:
        for f in frames:
            if is_python(f):
                c[(f[0], f[2])] += count
                break
    return c


def check_generated(path, name):
    """pyreuse.py's frames: gen_K is right only on lines K + 2 to K + 5, or
    on its first line (1), which stands for an unknown offset."""
    good = bad = unknown = 0
    wrong = []
    for count, frames in parse_ours(path):
        for fn, _, line in frames:
            m = re.match(r'^gen_(\d+)$', fn)
            if fn == '[unknown]':
                unknown += count
            elif m:
                k = int(m.group(1))
                if k + 2 <= line <= k + 5 or line == 1:  # 1: offset unknown
                    good += count
                else:
                    bad += count
                    wrong.append('%s:%d' % (fn, line))
    ok = good >= 100 and bad == 0
    print('%s: %s:reused-code (%d samples in generated code named right, %d wrong%s, '
          '%d [unknown])' % ('PASS' if ok else 'FAIL', name, good, bad,
                             ' ' + ','.join(sorted(set(wrong))[:5]) if wrong else '', unknown))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('ours')
    ap.add_argument('spy', nargs='?')
    ap.add_argument('--generated', action='store_true',
                    help='check the names of pyreuse.py\'s code objects in OURS only')
    ap.add_argument('--name', default='python')
    ap.add_argument('--cpu', help='"tid ns" lines: each thread\'s CPU time while sampled')
    ap.add_argument('--min-coverage', type=float, default=0.9)
    ap.add_argument('--min-share', type=float, default=0.05)
    ap.add_argument('--tolerance', type=float, default=0.05)
    a = ap.parse_args()
    if a.generated:
        return check_generated(a.ours, a.name)
    ours, spy = parse_ours(a.ours), parse_spy(a.spy)
    ok = True

    def verdict(check, good, detail):
        nonlocal ok
        ok &= good
        print('%s: %s:%s (%s)' % ('PASS' if good else 'FAIL', a.name, check, detail))

    all_ours = sum(c for c, _ in ours)
    oshare, ototal = inclusive(ours)
    sshare, stotal = inclusive(spy)
    cov = ototal / all_ours if all_ours else 0
    verdict('coverage', cov >= a.min_coverage and stotal > 0,
            '%d of %d samples with Python frames (%.1f%%); py-spy %d samples'
            % (ototal, all_ours, 100 * cov, stotal))

    # Each thread's share of the process against the kernel's own CPU
    # accounting of the threads over the same seconds (--cpu: "tid ns"
    # lines): py-spy counts a thread waiting for the GIL, and weighs the
    # two by up to 10 points differently from their CPU time.
    if a.cpu:
        cpu = {}
        for line in open(a.cpu):
            tid, ns = line.split()
            cpu[int(tid)] = int(ns)
        ours_t, tids = parse_ours(a.ours, with_tids=True)
        mine = collections.Counter()
        for (count, _), tid in zip(ours_t, tids):
            mine[tid] += count
        total_cpu, total_mine = sum(cpu.values()), sum(mine.values())
        gaps = ['%d %.1f/%.1f' % (t, 100 * mine[t] / total_mine, 100 * cpu[t] / total_cpu)
                for t in sorted(cpu) if total_cpu and cpu[t] / total_cpu >= a.min_share]
        # (gap, room) per thread of at least --min-share of the CPU time;
        # the worst is the one furthest beyond its room.  None: a failure.
        checked = [(abs(mine[t] / total_mine - cpu[t] / total_cpu),
                    max(a.tolerance, 4 * (cpu[t] / total_cpu * (1 - cpu[t] / total_cpu)
                                          / total_mine) ** 0.5))
                   for t in cpu if total_cpu and total_mine and cpu[t] / total_cpu >= a.min_share]
        worst_t, allowed = max(checked or [(1.0, a.tolerance)], key=lambda g: g[0] - g[1])
        print('  threads % of samples/of CPU time: ' + ', '.join(gaps))
        verdict('thread-split', total_mine > 0 and worst_t <= allowed,
                'worst gap %.1f points, %.1f allowed, %d samples'
                % (100 * worst_t, 100 * allowed, total_mine))

    # Within each thread, every function's inclusive share against py-spy's.
    worst, rows = 0.0, []
    ogroups, sgroups = by_thread(ours), by_thread(spy)
    for t, sg in sorted(sgroups.items()):
        ssh, stot = inclusive(sg)
        osh, otot = inclusive(ogroups.get(t, []))
        if stot < a.min_share * sum(c for c, _ in spy):
            continue
        for fn, sv in sorted(ssh.items(), key=lambda kv: -kv[1]):
            if sv < a.min_share:
                continue
            o = osh.get(fn, 0.0)
            worst = max(worst, abs(o - sv))
            rows.append('%s/%s %.1f/%.1f' % (t, fn, 100 * o, 100 * sv))
    print('  inclusive % within the thread, fleetprof/py-spy: ' + ', '.join(rows))
    verdict('shares', bool(rows) and worst <= a.tolerance,
            '%d functions, worst gap %.1f points' % (len(rows), 100 * worst))

    slines, olines = innermost_lines(spy), innermost_lines(ours)
    top = [k for k, v in slines.most_common(3) if v >= a.min_share * stotal]
    bad = []
    for fn, line in top:
        mine = [(v, l) for (f, l), v in olines.items() if f == fn]
        got = max(mine)[1] if mine else None
        if got != line:
            bad.append('%s: py-spy line %d, fleetprof %s' % (fn, line, got))
    verdict('lines', bool(top) and not bad,
            '; '.join(bad) if bad else ', '.join('%s:%d' % t for t in top))
    return 0 if ok else 1


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Exception as e:  # a comparison that cannot run is a failure
        print('FAIL: %s:compare (%s: %s)' % (
            sys.argv[sys.argv.index('--name') + 1] if '--name' in sys.argv else 'python',
            type(e).__name__, e))
        sys.exit(1)
