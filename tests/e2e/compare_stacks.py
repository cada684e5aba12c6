#!/usr/bin/env python3
"""compare_stacks.py: compare fleetprof's user stacks with perf's.

usage: compare_stacks.py --workload NAME --folded PROFILE.folded
                         --perf PERF.script [--pclntab MODULE=ELF]...
                         [--min-samples N]

PROFILE.folded is `fleetprof record -p PID`'s output ("PROCESS;frame;...
COUNT", root first).  PERF.script is `perf script --no-inline -F
comm,tid,ip,sym,dso` of a `perf record --call-graph ...` of the same
process over the same window: a header line per sample, then its frames,
leaf first, "ADDR SYMBOL (DSO)", then a blank line.

Only user frames are compared: fleetprof's kernel frames ("_[k]") and
perf's [kernel.kallsyms]/[guest.kernel] frames are dropped, and so are
fleetprof's inline frames ("_[i]": perf runs with --no-inline, so both
sides list physical frames, one per return address).  A stack with no
user frame left is not a user stack and counts on neither side.

Names are normalised before comparing (norm()): perf's "+0x..." offsets
and "@GLIBC..." versions, compiler clone suffixes (.isra.0, .part.0,
.constprop.0, .cold, [clone ...]), mangled C++ names (through binutils'
c++filt), C++ parameter lists (perf and fleetprof both demangle;
"ns::f(int)" and "ns::f" are the same function) and glibc's
alias spellings of one entry point (__libc_start_main_impl,
__libc_start_main_alias_2, __GI___clone3 ...).  A frame without a symbol
(perf's "[unknown]", fleetprof's "module+0xOFFSET" or "[unknown]+0x...")
is unknown: it keeps its place in the stack.  A caller frame without a
symbol in a known module (liblzma's static functions, CPython's) stands
for its call site, "MODULE+0xADDR" with ADDR the file offset of its return
address minus one, and takes part in the share check like a function:
fleetprof prints the return address (subtracted here), perf's DWARF
unwinder prints the return address minus one already (libunwind steps
back into the call instruction; --perf-callgraph fp: the kernel's walk
prints return addresses, subtracted here).  A leaf without a symbol, or
a frame outside any mapping, is no function at all.  One exception: a
return address at the first byte of a function is where a signal frame
returns to (glibc's __restore_rt, a symbol of size 0 that perf cannot
name once it stepped back a byte); it is named from the module's symbol
tables and its debug file (/usr/lib/debug/.build-id/) on both sides.

--pclntab MODULE=ELF names the unknown frames of MODULE (a stripped Go
binary: no .symtab, but its .gopclntab, which the Go runtime itself needs,
is always there) from the binary's own function table, on both sides
alike: fleetprof's "MODULE+0xOFFSET" (a file offset) and perf's
"ADDR [unknown] (.../MODULE)" (perf prints a file-relative address too).
Caller frames are looked up at their return address minus one.

Checks (printed as PASS:/FAIL: unwind:WORKLOAD:CHECK):

samples     both sides have at least --min-samples user stacks.
perf-root-reach
            the oracle itself: at least 90% of perf's user stacks reach
            a root.  A perf stack that does not is one perf could not
            unwind (the DWARF unwinder copies a fixed 64 KiB of stack, and
            gives up without CFI); it tells nothing about the real stack.
root-reach  at least 97% of fleetprof's user stacks (weighted by count)
            reach a root.
shares      every function on >= 5% of perf's complete stacks has an
            inclusive share (fraction of stacks that contain it at least
            once) in fleetprof's user stacks within 5 points of perf's.
no-extra-frames
            the converse: every other function on >= 5% of fleetprof's
            stacks is within 5 points of its share in perf's (an unwinder
            that steps wrong lands on real functions too).

Roots.  ROOT_CANDIDATES are the outermost frames a thread can have: the
process entry (_start, __libc_start_main, __libc_start_call_main), a
thread's (start_thread, clone, clone3) and Go's (runtime.goexit for
goroutines, runtime.mstart for a thread's g0 stack, runtime.main,
runtime.rt0_go).  The root set of a run is derived from perf's own stacks
of that run: every candidate that is the outermost frame of some perf
stack, plus any other candidate that perf never shows with a caller above
it (perf may not sample a rare thread, e.g. Go's sysmon, that fleetprof
does: its stack ends in runtime.mstart, a true root).  So a candidate
that perf's stacks prove to have callers is no root in that run: where
perf goes on from __libc_start_call_main to __libc_start_main and _start,
a fleetprof stack that stops at __libc_start_call_main does not count.
A stack reaches its root when its outermost user frame is in that set.
perf's root reach is the weighted fraction of perf's user stacks whose
outermost frame is in the set; fleetprof's the same for its stacks.  A
perf stack that ends anywhere else is one perf failed to unwind.

Share denominator.  perf's shares are taken over perf's complete stacks
only (those that reach the root set): an incomplete perf stack lacks its
callers, so counting it would lower perf's share of every outer function
(main, the thread's start routine ...) and make the oracle disagree with
the truth, not with fleetprof.  perf-root-reach bounds what is left out
(at most 10%), and the number left out is printed.  fleetprof's shares are
over all its user stacks: a stack it failed to unwind is exactly what the
check must catch.

--self-test runs the comparison on made-up stacks with known verdicts
(same stacks spelled the two ways, stacks cut short by various amounts,
shares off by more and less than the tolerance, perf itself cut short).

Exit status 0 when every check passes, 1 otherwise.  On a failure both
tables are printed (shares, and the outermost frames of each side).
"""
import argparse
import collections
import os
import re
import struct
import subprocess
import sys

ROOT_CANDIDATES = {
    "_start", "__libc_start_main", "__libc_start_call_main",
    "start_thread", "clone", "clone3",
    "runtime.goexit", "runtime.mstart", "runtime.main", "runtime.rt0_go",
}
ROOT_REACH_MIN = 97.0
PERF_ROOT_REACH_MIN = 90.0
SHARE_MIN = 5.0
SHARE_TOLERANCE = 5.0

# glibc spells some entry points several ways: the versioned symbol, the
# internal alias (__GI_), the C name of the implementation in DWARF.
ALIASES = {
    "__libc_start_main_impl": "__libc_start_main",
    "__libc_start_main_alias_2": "__libc_start_main",
    "__clone3": "clone3",
    "__clone": "clone",
    "__clone_internal": "clone",
    "cfree": "free",
    "__free": "free",
    "__malloc": "malloc",
    "__write": "write",
    "__read": "read",
    "__qsort_r": "qsort_r",
}


def strip_params(name):
    """ "ns::A<int>::f(int) const" -> "ns::A<int>::f": drops a C++ parameter
    list (the parenthesised group that ends the name, qualifiers after it
    allowed).  Go's "pkg.(*T).Method" keeps its parentheses."""
    m = re.search(r"\)((?: const| volatile| &&?| noexcept)*)$", name)
    if not m:
        return name
    depth = 0
    for i in range(m.start(), -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i] if i > 0 and not name[:i].endswith("operator") else name
    return name


_DEMANGLED = {}


def demangle(name):
    """A mangled C++ name (both profilers demangle, but a name read here
    from a symbol table, or one a demangler gave up on, may still be
    mangled) through binutils' c++filt; unchanged if that fails."""
    if not name.startswith("_Z"):
        return name
    if name not in _DEMANGLED:
        try:
            out = subprocess.run(["c++filt", "--", name], capture_output=True, text=True, timeout=10)
            _DEMANGLED[name] = out.stdout.strip() or name
        except (OSError, subprocess.SubprocessError):
            _DEMANGLED[name] = name
    return _DEMANGLED[name]


def norm(name):
    """A function name as both sides can agree on it, or None if unknown."""
    name = name.strip()
    if not name or name.startswith("[unknown]"):
        return None
    name = re.sub(r"@+[A-Za-z_][A-Za-z0-9_.]*$", "", name)  # versions, before demangling
    name = demangle(name)
    name = re.sub(r"\+0x[0-9a-fA-F]+$", "", name)  # perf's symoff
    name = re.sub(r"@+[A-Za-z_][A-Za-z0-9_.]*$", "", name)  # symbol versions
    name = re.sub(r" \[clone [^]]*\]", "", name)  # c++filt's clone suffix
    name = re.sub(r" \(\.[A-Za-z_]+(\.\d+)?\)$", "", name)  # "f(int) (.cold)"
    name = strip_params(name)
    name = re.sub(r"\.abi0$", "", name)  # Go assembly functions' ABI suffix
    name = re.sub(r"(\.(isra|part|constprop|cold|lto_priv|localalias)(\.\d+)?)+$", "", name)
    while name.startswith("__GI_"):
        name = name[len("__GI_"):]
    name = ALIASES.get(name, name)
    # glibc's memcpy variants are aliases of the memmove ones (one address)
    name = re.sub(r"^__memcpy_(\w*unaligned\w*)$", r"__memmove_\1", name)
    # libc's syscall wrappers carry several names (write, __write,
    # __libc_write) at one address; the two sides may pick different ones.
    if name.startswith("__libc_") and name not in ROOT_CANDIDATES:
        name = name[len("__libc_"):]
    return ALIASES.get(name, name) or None


# ---- stripped Go binaries: the function table in .gopclntab ----

class Elf:
    """The little of a 64-bit little-endian ELF file this needs: its
    loadable segments and its sections by name."""

    def __init__(self, path):
        self.data = data = open(path, "rb").read()
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF")
        phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
        self.loads = []  # (file offset, vaddr, file size)
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:
                self.loads.append((p_offset, p_vaddr, p_filesz))
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        self.sections = {}  # name -> (type, addr, offset, size, link, entsize)
        self.by_index = raw
        names = raw[shstrndx][4] if raw else 0
        for sh_name, sh_type, _, sh_addr, sh_offset, sh_size, sh_link, _, _, sh_entsize in raw:
            name = data[names + sh_name:data.index(b"\0", names + sh_name)].decode(errors="replace")
            self.sections[name] = (sh_type, sh_addr, sh_offset, sh_size, sh_link, sh_entsize)

    def section(self, name):
        sh = self.sections.get(name)
        return None if sh is None or sh[0] == 8 else self.data[sh[2]:sh[2] + sh[3]]  # 8: NOBITS

    def vaddr(self, off):
        for p_offset, p_vaddr, p_filesz in self.loads:
            if p_offset <= off < p_offset + p_filesz:
                return off - p_offset + p_vaddr
        return None

    def build_id(self):
        note = self.section(".note.gnu.build-id")
        if not note or len(note) < 16:
            return None
        namesz, descsz, _ = struct.unpack_from("<III", note, 0)
        start = 12 + (namesz + 3) // 4 * 4
        return note[start:start + descsz].hex()

    def function_starts(self):
        """{vaddr: name} of the FUNC symbols in .symtab and .dynsym."""
        out = {}
        for _, (sh_type, _, sh_offset, sh_size, sh_link, _) in self.sections.items():
            if sh_type not in (2, 11):  # SYMTAB, DYNSYM
                continue
            strs = self.by_index[sh_link][4]
            for off in range(sh_offset, sh_offset + sh_size, 24):
                st_name, st_info, _, st_shndx, st_value, _ = struct.unpack_from("<IBBHQQ", self.data, off)
                if st_info & 0xF == 2 and st_shndx != 0 and st_value:
                    name = self.data[strs + st_name:self.data.index(b"\0", strs + st_name)]
                    out.setdefault(st_value, name.decode(errors="replace"))
        return out


class EntryNames:
    """Names of the functions that start at a file offset of a module, from
    its own symbol tables and its debug file (/usr/lib/debug/.build-id).
    A return address at a function's first byte is no call's: it is where
    a signal frame returns to (glibc's __restore_rt, a symbol of size 0
    that perf leaves "[unknown]" once it has stepped back a byte)."""

    def __init__(self):
        self.modules = {}

    def name(self, path, off):
        if path not in self.modules:
            table = {}
            try:
                elf = Elf(path)
                starts = elf.function_starts()
                bid = elf.build_id()
                debug = bid and f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
                if debug and os.path.exists(debug):
                    starts.update(Elf(debug).function_starts())
                for p_offset, p_vaddr, p_filesz in elf.loads:
                    for v, n in starts.items():
                        if p_vaddr <= v < p_vaddr + p_filesz:
                            table[v - p_vaddr + p_offset] = n
            except (OSError, ValueError, struct.error, IndexError):
                pass
            self.modules[path] = table
        return self.modules[path].get(off)


class GoFuncs:
    """Function names of a Go binary from its .gopclntab (Go 1.18+)."""

    def __init__(self, path):
        elf = Elf(path)
        self.loads = elf.loads
        pcln = elf.section(".gopclntab")
        text_addr = elf.sections.get(".text", (0, 0))[1]
        if pcln is None:
            raise ValueError(f"{path}: no .gopclntab")
        magic, = struct.unpack_from("<I", pcln, 0)
        if magic not in (0xFFFFFFF0, 0xFFFFFFF1) or pcln[7] != 8:
            raise ValueError(f"{path}: unknown .gopclntab version {magic:#x}")
        (nfunc, _nfiles, text_start, funcname_off, _cu, _filetab, _pctab,
         pcln_off) = struct.unpack_from("<8Q", pcln, 8)
        # Newer linkers leave textStart 0 for the runtime to fill in from
        # moduledata; entries are offsets from the start of .text then.
        text_start = text_start or text_addr
        self.entries, self.names = [], []
        for i in range(nfunc + 1):
            entryoff, funcoff = struct.unpack_from("<II", pcln, pcln_off + 8 * i)
            self.entries.append(text_start + entryoff)
            if i < nfunc:
                _, name_off = struct.unpack_from("<Ii", pcln, pcln_off + funcoff)
                start = funcname_off + name_off
                self.names.append(pcln[start:pcln.index(b"\0", start)].decode(errors="replace"))

    def name_at_offset(self, off):
        for p_offset, p_vaddr, p_filesz in self.loads:
            if p_offset <= off < p_offset + p_filesz:
                return self.name_at(off - p_offset + p_vaddr)
        return None

    def name_at(self, vaddr):
        lo, hi = 0, len(self.names)
        if not self.entries or vaddr < self.entries[0] or vaddr >= self.entries[-1]:
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.entries[mid] <= vaddr:
                lo = mid
            else:
                hi = mid
        return self.names[lo]


ENTRY_NAMES = EntryNames()
MODULE_PATHS = {}  # module file name -> path, from perf's frames (read perf first)


# ---- reading both profiles: lists of (root-first user frames, count) ----
# A frame is a normalised function name, or None when unknown.

def read_folded(path, pcln):
    """fleetprof's folded stacks: (root-first frames, count)."""
    stacks = []
    for line in open(path, errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        frames = [f for f in stack.split(";")[1:] if not f.endswith("_[i]")]  # process first
        # Kernel frames end the stack (the leaf side).  A "_[k]" frame above
        # a user frame is a user-space value in the kernel's address range
        # that a frame walk took for a return address: unknown, no root.
        while frames and frames[-1].endswith("_[k]"):
            frames.pop()
        user = ["[unknown]" if f.endswith("_[k]") else f for f in frames]
        out = []
        for i, f in enumerate(user):
            m = re.fullmatch(r"(.+)\+0x([0-9a-fA-F]+)", f)
            if m and m.group(1) in pcln:
                off = int(m.group(2), 16) - (0 if i == len(user) - 1 else 1)
                out.append(norm(pcln[m.group(1)].name_at_offset(off) or "[unknown]"))
            elif m and m.group(1) != "[unknown]" and i != len(user) - 1:
                ret = int(m.group(2), 16)
                path = MODULE_PATHS.get(m.group(1))
                entry = path and ENTRY_NAMES.name(path, ret)
                out.append(norm(entry) if entry else f"{m.group(1)}+0x{ret - 1:x}")  # a call site
            elif m:
                out.append(None)  # no symbol: a leaf, or outside any mapping
            else:
                out.append(norm(f))
        if out:
            stacks.append((out, int(n)))
    return stacks


KERNEL_DSOS = ("[kernel.kallsyms]", "[guest.kernel.kallsyms]")


def read_perf(path, pcln, callers_minus_one):
    """perf script's stacks: (root-first frames, 1)."""
    stacks = []
    frames = []

    def flush():
        user = [f for f in frames if f is not False]
        if user:
            user.reverse()
            stacks.append((user, 1))
        frames.clear()

    leaf = True
    for line in open(path, errors="replace"):
        if not line.strip():
            flush()
            leaf = True
            continue
        if not line.startswith((" ", "\t")):
            flush()
            leaf = True
            continue
        m = re.match(r"\s*([0-9a-fA-F]+)\s+(.*?)\s+\((.*)\)\s*$", line)
        if not m:
            frames.append(None)
            continue
        addr, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
        if dso.startswith(KERNEL_DSOS) or dso.startswith("[kernel"):
            frames.append(False)
            continue
        base = os.path.basename(dso)
        # the caller's call instruction, one byte back from where it returns
        site = addr if leaf or callers_minus_one else addr - 1
        if sym.startswith("[unknown]") and base in pcln:
            sym = pcln[base].name_at_offset(site) or "[unknown]"
        name = norm(sym)
        if name is None and not leaf and not dso.startswith("[unknown"):
            MODULE_PATHS.setdefault(base, dso)
            entry = ENTRY_NAMES.name(dso, site + 1)
            name = norm(entry) if entry else f"{base}+0x{site:x}"
        frames.append(name)
        leaf = False
    flush()
    return stacks


# ---- the comparison ----

def outermost_table(stacks):
    c = collections.Counter()
    for frames, n in stacks:
        c[frames[0] or "(unknown)"] += n
    return c


def shares(stacks):
    total = sum(n for _, n in stacks)
    c = collections.Counter()
    for frames, n in stacks:
        for f in set(frames):
            if f is not None:
                c[f] += n
    return {f: 100.0 * k / total for f, k in c.items()} if total else {}


def compare(w, ours, perf, min_samples, verbose=False):
    """Print the checks of one workload; True when all pass."""
    failed = False

    def report(check, ok, detail):
        nonlocal failed
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'}: unwind:{w}:{check} ({detail})")

    tot_o, tot_p = sum(n for _, n in ours), sum(n for _, n in perf)
    report("samples", tot_o >= min_samples and tot_p >= min_samples,
           f"user stacks: fleetprof {tot_o}, perf {tot_p}, need {min_samples}")

    out_p, out_o = outermost_table(perf), outermost_table(ours)
    has_caller = {f for frames, _ in perf for f in frames[1:]}
    roots = {f for f in out_p if f in ROOT_CANDIDATES}
    roots |= {f for f in out_o if f in ROOT_CANDIDATES and f not in has_caller}
    reach_p = 100.0 * sum(out_p[f] for f in roots) / tot_p if tot_p else 0.0
    reach_o = 100.0 * sum(out_o[f] for f in roots) / tot_o if tot_o else 0.0
    rootlist = ",".join(sorted(roots)) or "none"
    report("perf-root-reach", reach_p >= PERF_ROOT_REACH_MIN,
           f"perf {reach_p:.1f}% of its stacks reach {rootlist}, need {PERF_ROOT_REACH_MIN:.0f}%")
    report("root-reach", reach_o >= ROOT_REACH_MIN,
           f"fleetprof {reach_o:.1f}% (perf {reach_p:.1f}%) reach {rootlist}, need {ROOT_REACH_MIN:.0f}%")

    complete = [(s, n) for s, n in perf if s[0] in roots]
    sh_p, sh_o = shares(complete), shares(ours)
    checked = sorted((f for f, s in sh_p.items() if s >= SHARE_MIN), key=lambda f: -sh_p[f])
    worst, worst_f = 0.0, "-"
    for f in checked:
        gap = abs(sh_p[f] - sh_o.get(f, 0.0))
        if gap > worst:
            worst, worst_f = gap, f
    report("shares", bool(checked) and worst <= SHARE_TOLERANCE,
           f"{len(checked)} functions on >= {SHARE_MIN:.0f}% of perf's stacks; worst gap "
           f"{worst:.1f} points ({worst_f}); perf denominator {len(complete)} complete of {tot_p}")
    # The other way round: what fleetprof shows on >= 5% of its stacks is
    # on about as many of perf's (a wrong step of an unwinder lands on some
    # real function just as well as on garbage).
    extra = sorted((f for f, s in sh_o.items() if s >= SHARE_MIN and f not in checked),
                   key=lambda f: -sh_o[f])
    worst_x, worst_xf = 0.0, "-"
    for f in extra:
        gap = abs(sh_o[f] - sh_p.get(f, 0.0))
        if gap > worst_x:
            worst_x, worst_xf = gap, f
    report("no-extra-frames", worst_x <= SHARE_TOLERANCE,
           f"{len(extra)} other functions on >= {SHARE_MIN:.0f}% of fleetprof's stacks; worst gap "
           f"{worst_x:.1f} points ({worst_xf})")
    if worst_x > worst:
        worst, worst_f = worst_x, worst_xf

    # For scale: two independent samplings of the same process differ by
    # about this much (one standard deviation) at the worst function.
    q = sh_p.get(worst_f, 0.0) / 100.0
    noise = 100.0 * (q * (1 - q) / max(len(complete), 1) + q * (1 - q) / max(tot_o, 1)) ** 0.5
    print(f"SUMMARY: {w}: fleetprof root reach {reach_o:.1f}%, perf root reach {reach_p:.1f}%, "
          f"worst share gap {worst:.1f} points ({worst_f}; sampling noise {noise:.1f})")
    if failed or verbose:
        print(f"--- {w}: inclusive shares, % of user stacks (perf: complete stacks only)")
        print(f"{'perf':>7} {'fleetprof':>9} {'gap':>6}  function")
        shown = set(checked) | {f for f, s in sh_o.items() if s >= SHARE_MIN}
        for f in sorted(shown, key=lambda f: -max(sh_p.get(f, 0.0), sh_o.get(f, 0.0))):
            p, o = sh_p.get(f, 0.0), sh_o.get(f, 0.0)
            mark = " *" if f in checked and abs(p - o) > SHARE_TOLERANCE else ""
            print(f"{p:7.1f} {o:9.1f} {abs(p - o):6.1f}  {f}{mark}")
        print(f"--- {w}: outermost user frame, % of user stacks")
        print(f"{'perf':>7} {'fleetprof':>9}  frame")
        for f in sorted(set(out_p) | set(out_o), key=lambda f: -(out_p[f] / max(tot_p, 1) + out_o[f] / max(tot_o, 1)))[:15]:
            print(f"{100.0 * out_p[f] / max(tot_p, 1):7.1f} {100.0 * out_o[f] / max(tot_o, 1):9.1f}  {f}"
                  f"{' (root)' if f in roots else ''}")
    return not failed


# ---- a check of the comparison itself, on made-up stacks ----

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
PERF_ROOT = [("27249", "__libc_start_call_main", LIBC), ("27304", "__libc_start_main@@GLIBC_2.34", LIBC),
             ("1040", "_start", "/w/prog")]
FOLDED_ROOT = ["_start", "__libc_start_main_impl", "__libc_start_call_main"]


def self_test():
    """Writes perf script and folded files for known stacks, runs the
    comparison on them and checks each verdict.  0 when all are right."""
    import contextlib
    import io
    import tempfile

    # Two paths, 70/30, under main: perf's and fleetprof's spellings of
    # the same functions (parameters, clones, versions, __libc_ aliases,
    # mangled names, inline and kernel frames, unnamed call sites).
    perf_a = [("ffffffff81000000", "do_syscall_64", "[kernel.kallsyms]"),
              ("f1234", "__libc_write", LIBC),
              ("1200", "wl::level2(int) [clone .cold]", "/w/prog"),
              ("2233", "[unknown]", "/usr/lib/liblzma.so.5"),
              ("1100", "main", "/w/prog")] + PERF_ROOT
    fold_a = FOLDED_ROOT + ["main", "liblzma.so.5+0x2234", "wl::level2(int) (.cold)",
                            "write", "__GI___libc_write_[i]", "entry_SYSCALL_64_[k]", "do_syscall_64_[k]"]
    perf_b = [("1300", "ns::A<int>::f(int) const", "/w/prog"), ("1100", "main", "/w/prog")] + PERF_ROOT
    perf_b.insert(1, ("1400", "ns::B::~B()", "/w/prog"))
    fold_b = FOLDED_ROOT + ["main", "_ZN2ns1BD2Ev", "ns::A<int>::f(int) const", "ns::g(double)_[i]"]

    def perf_text(stacks):
        out = []
        for frames, n in stacks:
            for _ in range(n):
                out.append("prog 4242 \n" + "".join(f"\t{a:>16} {s} ({d})\n" for a, s, d in frames) + "\n")
        return "".join(out)

    def folded_text(stacks):
        return "".join(f"prog;{';'.join(f)} {n}\n" for f, n in stacks)

    def run(perf_stacks, folded_stacks):
        with tempfile.TemporaryDirectory() as d:
            pp, fp = os.path.join(d, "perf.script"), os.path.join(d, "p.folded")
            open(pp, "w").write(perf_text(perf_stacks))
            open(fp, "w").write(folded_text(folded_stacks))
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                perf = read_perf(pp, {}, True)
                compare("t", read_folded(fp, {}), perf, 100)
            return {m.group(2): m.group(1) == "PASS"
                    for m in re.finditer(r"^(PASS|FAIL): unwind:t:([a-z-]+)", buf.getvalue(), re.M)}

    ok = True

    def expect(what, got, want):
        nonlocal ok
        good = all(got.get(k) == v for k, v in want.items())
        ok &= good
        print(f"  {'ok' if good else 'WRONG'}: {what}: {got}")

    perf = [(perf_a, 140), (perf_b, 60)]
    expect("same stacks, other spellings", run(perf, [(fold_a, 140), (fold_b, 60)]),
           {"samples": True, "perf-root-reach": True, "root-reach": True, "shares": True,
            "no-extra-frames": True})
    leaf_only = [(["prog+0x1234"], 140), (["ns::A<int>::f(int) const"], 60)]
    expect("stacks cut after the leaf", run(perf, leaf_only),
           {"perf-root-reach": True, "root-reach": False, "shares": False})
    cut = lambda f: f[3:]  # lost main's callers
    expect("4% cut short", run(perf, [(fold_a, 132), (cut(fold_a), 8), (fold_b, 60)]),
           {"root-reach": False, "shares": True})
    expect("2% cut short", run(perf, [(fold_a, 136), (cut(fold_a), 4), (fold_b, 60)]),
           {"root-reach": True, "shares": True})
    expect("stops at __libc_start_call_main where perf goes on",
           run(perf, [(fold_a[2:], 140), (fold_b[2:], 60)]), {"root-reach": False})
    bogus = FOLDED_ROOT + ["main", "free"]  # a wrong step lands in free()
    expect("a made-up caller on 10%", run(perf, [(fold_a, 140), (fold_b, 40), (bogus + fold_b[4:], 20)]),
           {"root-reach": True, "shares": True, "no-extra-frames": False})
    junk = ["[unknown]+0x8558939f49478b00_[k]"]  # a walk past the root
    expect("a frame above the root", run(perf, [(junk + fold_a, 140), (junk + fold_b, 60)]),
           {"root-reach": False, "shares": True})
    expect("shares 7 points off", run(perf, [(fold_a, 154), (fold_b, 46)]),
           {"root-reach": True, "shares": False})
    expect("shares 4 points off", run(perf, [(fold_a, 148), (fold_b, 52)]),
           {"root-reach": True, "shares": True})
    expect("perf itself cut short", run([(perf_a, 140), (perf_a[:-3], 30), (perf_b, 30)],
                                        [(fold_a, 140), (fold_b, 60)]), {"perf-root-reach": False})
    expect("too few samples", run([(perf_a, 50)], [(fold_a, 50)]), {"samples": False})
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--folded", required=True)
    ap.add_argument("--perf", required=True)
    ap.add_argument("--pclntab", action="append", default=[], metavar="MODULE=ELF")
    ap.add_argument("--min-samples", type=int, default=200)
    ap.add_argument("--perf-callgraph", choices=("dwarf", "fp"), default="dwarf",
                    help="how perf unwound: its DWARF unwinder prints callers' return addresses minus one")
    a = ap.parse_args()
    pcln = {}
    for spec in a.pclntab:
        mod, _, path = spec.partition("=")
        pcln[mod] = GoFuncs(path)
    try:
        perf = read_perf(a.perf, pcln, a.perf_callgraph == "dwarf")
        ours = read_folded(a.folded, pcln)
    except OSError as e:
        print(f"FAIL: unwind:{a.workload}:inputs ({e})")
        return 1
    ok = compare(a.workload, ours, perf, a.min_samples, bool(os.environ.get("UNWIND_VERBOSE")))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
