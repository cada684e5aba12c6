#!/bin/bash
# pyoffsets_test.sh: the CPython offsets of device/pyoffsets.c against the
# interpreters themselves.  For every interpreter tests/python/fetch.sh
# provides (Debian's 3.9, 3.11 and 3.13 with their -dbg DWARF, pyenv's 3.12
# and 3.13 builds where the machine has them):
#   3.9/3.11/3.12  the table entry equals what gdb reads from the DWARF
#                  (tests/python/dwarf_offsets.sh), field by field
#   3.13           a live interpreter's _Py_DebugOffsets, read from its
#                  _PyRuntime (dynamic symbol + /proc/PID/maps, then
#                  /proc/PID/mem) and parsed by fp_py_offsets_debug, equals
#                  the DWARF
# and the str state bits (kind, compact, ascii) sit where pyoffsets.c says.
# One PASS line per interpreter.  3.12 has no Debian build: a machine
# without pyenv's 3.12 fails the 3.12 check (it cannot be verified there).
TEST=pyoffsets
. tests/e2e/lib.sh
need_root

FPY_CACHE=${FPY_CACHE:-/var/cache/fleetprof-python}
export FPY_CACHE
if ! bash tests/python/fetch.sh > "$TMP/fetch.out" 2> "$TMP/fetch.err"; then
	tail -n 20 "$TMP/fetch.err"
	fail fetch "tests/python/fetch.sh failed"
	exit 0
fi
cat "$TMP/fetch.err" >&2

DUMP=$TMP/pyoffsets_dump
if ! ${CC:-cc} -O1 -g -Wall -std=gnu11 -D_GNU_SOURCE -Icommon -Idevice -Ibpf \
	tests/python/pyoffsets_dump.c device/pyoffsets.c -o "$DUMP" 2> "$TMP/cc.err"; then
	cat "$TMP/cc.err"
	fail build "pyoffsets_dump"
	exit 0
fi

# runtime_addr PID ELF: the address of _PyRuntime in process PID, where ELF
# (a host path) is mapped; its first PT_LOAD maps file offset 0.
runtime_addr() {
	local pid=$1 elf=$2 sym load base
	sym=$(readelf --dyn-syms -W "$elf" | awk '$8 == "_PyRuntime" { print $2; exit }')
	load=$(readelf -l -W "$elf" | awk '$1 == "LOAD" { print $3; exit }')
	base=$(awk -v p="$elf" '$6 == p && $3 ~ /^0+$/ { split($1, a, "-"); print a[1]; exit }' \
		"/proc/$pid/maps")
	[ -n "$sym" ] && [ -n "$load" ] && [ -n "$base" ] || return 1
	printf '%x\n' $((0x$base + 0x$sym - (load & ~0xfff)))
}

# state_bits FILE: the str state bits dwarf_offsets.sh found, as one line.
state_bits() {
	grep -E '^str_bit_(kind|compact|ascii) ' "$1" | sort | tr '\n' ' '
}
want_bits="str_bit_ascii 6 str_bit_compact 5 str_bit_kind 2 "

seen12=0
while read -r ver src root interp elf id dbg; do
	case $ver in '#'* | '') continue ;; esac
	name="$ver-$src"
	minor=${ver#3.}
	if ! bash tests/python/dwarf_offsets.sh "$minor" "$dbg" > "$TMP/dwarf-$name" 2> "$TMP/dwarf-$name.err"; then
		fail "$name" "DWARF of $dbg: $(head -n 3 "$TMP/dwarf-$name.err" | tr '\n' ' ')"
		continue
	fi
	grep '^po_' "$TMP/dwarf-$name" > "$TMP/dwarf-po-$name"
	bits=$(state_bits "$TMP/dwarf-$name")
	if [ "$bits" != "$want_bits" ]; then
		fail "$name" "str state bits in DWARF: $bits"
		continue
	fi
	case $minor in
	9 | 11 | 12)
		[ "$minor" = 12 ] && seen12=1
		if ! "$DUMP" table "$minor" 2>&1 | grep '^po_' > "$TMP/table-$name"; then
			fail "$name" "no table entry for $ver"
			continue
		fi
		if diff "$TMP/table-$name" "$TMP/dwarf-po-$name" > "$TMP/diff-$name"; then
			pass "$name (table = DWARF of $id)"
		else
			fail "$name" "table differs from the DWARF of $id: $(grep '^[<>]' "$TMP/diff-$name" | tr '\n' ' ')"
		fi
		;;
	13)
		# A live interpreter, in its tree or on the host.
		if [ "$root" = / ]; then
			"$interp" -c 'import time; time.sleep(60)' &
		else
			chroot "$root" "$interp" -c 'import time; time.sleep(60)' &
		fi
		pid=$!
		PIDS+=($pid)
		# Until the interpreter has mapped itself and initialised _PyRuntime.
		addr=""
		wait_for 10 bash -c "grep -qF '$elf' /proc/$pid/maps && \
			[ \"\$(readlink -f /proc/$pid/exe)\" = '$(readlink -f "$root/${interp#/}")' ]" || true
		sleep 0.3
		addr=$(runtime_addr "$pid" "$elf") || addr=""
		if [ -z "$addr" ]; then
			fail "$name" "no _PyRuntime in the maps of pid $pid"
		elif ! "$DUMP" mem "$pid" "$addr" > "$TMP/live-$name" 2> "$TMP/live-$name.err"; then
			fail "$name" "_Py_DebugOffsets at 0x$addr: $(cat "$TMP/live-$name.err")"
		elif ! grep -qx 'version 0x030d' "$TMP/live-$name"; then
			fail "$name" "parsed version $(grep '^version' "$TMP/live-$name")"
		elif grep '^po_' "$TMP/live-$name" | diff - "$TMP/dwarf-po-$name" > "$TMP/diff-$name"; then
			pass "$name (live _Py_DebugOffsets = DWARF of $id)"
		else
			fail "$name" "_Py_DebugOffsets differ from the DWARF of $id: $(grep '^[<>]' "$TMP/diff-$name" | tr '\n' ' ')"
		fi
		kill "$pid" 2> /dev/null
		wait "$pid" 2> /dev/null
		;;
	*)
		fail "$name" "no check for $ver"
		;;
	esac
done < "$FPY_CACHE/pythons.txt"
[ "$seen12" = 1 ] || fail "3.12" "no CPython 3.12 with DWARF on this machine: the 3.12 table entry is unverified"
# No table entry where none was verified.
check no-entry-3.10-3.13 bash -c "! '$DUMP' table 10 2>/dev/null && ! '$DUMP' table 13 2>/dev/null"
