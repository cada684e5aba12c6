#!/bin/bash
# dwarf_offsets.sh MINOR FILE: the offsets of struct fp_py_offsets
# (device/pyoffsets.h) for CPython 3.MINOR, read with gdb from the DWARF in
# FILE (an interpreter's separate debug file, or an ELF file with its
# DWARF).  Prints "po_NAME VALUE" lines in the order of the structure, then
# the state bit positions of compact str objects as "str_bit_NAME BIT".
# Fields a version does not have print 65535 (FP_PY_NO_OFFSET) or, for
# po_co_code before 3.11, 0, as pyoffsets.c has them.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: dwarf_offsets.sh MINOR FILE" >&2; exit 2; }
minor=$1 file=$2
command -v gdb > /dev/null || { echo "dwarf_offsets.sh: gdb not found" >&2; exit 1; }

# name expression: expression prints an offset, or "-" for a constant.
off() { printf '%s\n' "$1|print (long)&(($2 *)0)->$3"; }
fields=()
add() { fields+=("$(off "$@")"); }
const() { fields+=("$1|print $2"); }

add po_rt_interp_head _PyRuntimeState interpreters.head
case $minor in
9)
	add po_is_threads_head PyInterpreterState tstate_head
	add po_ts_next PyThreadState next
	add po_ts_tid PyThreadState thread_id
	add po_ts_frame PyThreadState frame
	const po_cf_frame 65535
	add po_fr_previous PyFrameObject f_back
	add po_fr_code PyFrameObject f_code
	add po_fr_instr PyFrameObject f_lasti
	const po_fr_entry 65535
	;;
11 | 12)
	add po_is_threads_head PyInterpreterState threads.head
	add po_ts_next PyThreadState next
	add po_ts_tid PyThreadState native_thread_id
	add po_ts_frame PyThreadState cframe
	add po_cf_frame _PyCFrame current_frame
	add po_fr_previous 'struct _PyInterpreterFrame' previous
	add po_fr_code 'struct _PyInterpreterFrame' f_code
	add po_fr_instr 'struct _PyInterpreterFrame' prev_instr
	if [ "$minor" = 11 ]; then
		add po_fr_entry 'struct _PyInterpreterFrame' is_entry
	else
		add po_fr_entry 'struct _PyInterpreterFrame' owner
	fi
	;;
13)
	add po_is_threads_head PyInterpreterState threads.head
	add po_ts_next PyThreadState next
	add po_ts_tid PyThreadState native_thread_id
	add po_ts_frame PyThreadState current_frame
	const po_cf_frame 65535
	add po_fr_previous 'struct _PyInterpreterFrame' previous
	add po_fr_code 'struct _PyInterpreterFrame' f_executable
	add po_fr_instr 'struct _PyInterpreterFrame' instr_ptr
	add po_fr_entry 'struct _PyInterpreterFrame' owner
	;;
*)
	echo "dwarf_offsets.sh: no field list for 3.$minor" >&2
	exit 1
	;;
esac
add po_co_firstlineno PyCodeObject co_firstlineno
add po_co_filename PyCodeObject co_filename
if [ "$minor" = 9 ]; then
	add po_co_name PyCodeObject co_name
	add po_co_linetable PyCodeObject co_lnotab
	const po_co_code 0
else
	add po_co_name PyCodeObject co_qualname
	add po_co_linetable PyCodeObject co_linetable
	add po_co_code PyCodeObject co_code_adaptive
fi
add po_bytes_size PyBytesObject ob_base.ob_size
add po_bytes_data PyBytesObject ob_sval
add po_str_state PyASCIIObject state
add po_str_length PyASCIIObject length
const po_str_ascii_size 'sizeof(PyASCIIObject)'
const po_str_compact_size 'sizeof(PyCompactUnicodeObject)'

args=()
for f in "${fields[@]}"; do
	args+=(-ex "${f#*|}")
done
args+=(-ex 'ptype /o PyASCIIObject')
out=$(gdb -nx -batch "${args[@]}" "$file" 2>&1)
# "$N = VALUE" lines, one per field, in order.
mapfile -t values < <(printf '%s\n' "$out" | sed -n 's/^\$[0-9]* = \([0-9]*\)$/\1/p')
if [ "${#values[@]}" -ne "${#fields[@]}" ]; then
	echo "dwarf_offsets.sh: gdb answered ${#values[@]} of ${#fields[@]} fields:" >&2
	printf '%s\n' "$out" | grep -v '^\$' | head -n 10 >&2
	exit 1
fi
for i in "${!fields[@]}"; do
	echo "${fields[$i]%%|*} ${values[$i]}"
done
# "/*     32: 2   |       4 */        unsigned int kind : 3;"
printf '%s\n' "$out" | sed -n 's@^/\* *[0-9]*: *\([0-9]*\) *|.*unsigned int \([a-z_]*\) : [0-9]*;$@str_bit_\2 \1@p'
