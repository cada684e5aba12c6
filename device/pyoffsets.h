/* pyoffsets.h: where CPython keeps what the agent and the BPF walker read,
 * per minor version.
 *
 * Below 3.13 the offsets come from a table in pyoffsets.c, one entry per
 * supported minor version, taken from the interpreter's own DWARF (Debian's
 * -dbg packages) and checked against it by tests/e2e/pyoffsets_test.sh.
 * From 3.13 on, the interpreter publishes them itself in _Py_DebugOffsets,
 * the first member of _PyRuntime, which the agent reads from the process.
 * Offsets are in bytes from the start of the named structure; x86-64 and
 * arm64 share them (both LP64).
 */
#ifndef FP_PYOFFSETS_H
#define FP_PYOFFSETS_H

#include <stddef.h>
#include <stdint.h>

struct fp_py_offsets {
	uint16_t po_version;   /* major << 8 | minor */
	uint8_t po_model;      /* enum fp_py_model (bpf/python.h) */
	uint8_t po_tid_kind;   /* enum fp_py_tid */
	uint8_t po_instr_kind; /* enum fp_py_instr */
	uint8_t po_lines;      /* enum fp_py_lines (common/batch.h) */
	/* _PyRuntimeState, PyInterpreterState, PyThreadState, _PyCFrame */
	uint16_t po_rt_interp_head;  /* interpreters.head */
	uint16_t po_is_threads_head; /* tstate_head (3.9), threads.head (3.11+) */
	uint16_t po_ts_next;
	uint16_t po_ts_tid;   /* native_thread_id (3.11+), thread_id (3.9) */
	uint16_t po_ts_frame; /* frame (3.9), cframe (3.11, 3.12), current_frame (3.13) */
	uint16_t po_cf_frame; /* _PyCFrame.current_frame; FP_PY_NO_OFFSET without cframe */
	/* PyFrameObject (3.9) or _PyInterpreterFrame (3.11+) */
	uint16_t po_fr_previous; /* f_back, previous */
	uint16_t po_fr_code;     /* f_code, f_executable (3.13) */
	uint16_t po_fr_instr;    /* f_lasti, prev_instr, instr_ptr (3.13) */
	uint16_t po_fr_entry;    /* is_entry (3.11), owner (3.12+); FP_PY_NO_OFFSET (3.9) */
	/* PyCodeObject */
	uint16_t po_co_firstlineno;
	uint16_t po_co_filename;
	uint16_t po_co_name;      /* co_qualname (3.11+), co_name (3.9) */
	uint16_t po_co_linetable; /* co_linetable (3.11+), co_lnotab (3.9) */
	uint16_t po_co_code;      /* co_code_adaptive (3.11+); 0 for 3.9 */
	/* PyBytesObject */
	uint16_t po_bytes_size; /* ob_size */
	uint16_t po_bytes_data; /* ob_sval */
	/* PyUnicodeObject (compact forms) */
	uint16_t po_str_state;        /* the state bit field's first byte */
	uint16_t po_str_length;       /* length, in code points */
	uint16_t po_str_ascii_size;   /* sizeof(PyASCIIObject): ASCII data follow */
	uint16_t po_str_compact_size; /* sizeof(PyCompactUnicodeObject): other data follow */
};

/* fp_py_offsets_for: the table entry for version (major << 8 | minor), or
 * NULL when there is none (3.13 and later read _Py_DebugOffsets). */
const struct fp_py_offsets *fp_py_offsets_for(unsigned version);

/* fp_py_offsets_debug: parse the len bytes of a _Py_DebugOffsets read from
 * the start of a process's _PyRuntime into *out.  0; -ENOENT when the
 * cookie is not there; -ENOTSUP for a version whose layout of
 * _Py_DebugOffsets is unknown (it changes between minor versions) or a
 * free-threaded build; -EINVAL when an offset is out of range for the BPF
 * walker's windows (FP_PY_FRAME_WINDOW, FP_PY_CODE_WINDOW) or len is short.
 * The bytes are the process's: untrusted. */
int fp_py_offsets_debug(const void *buf, size_t len, struct fp_py_offsets *out);

/* fp_py_offsets_check: 0 when o holds what the BPF walker and the agent
 * rely on (every field inside the windows they read, at an offset aligned
 * to its size; the object layouts consistent), else -EINVAL.  The table's
 * entries pass it; fp_py_offsets_debug applies it. */
int fp_py_offsets_check(const struct fp_py_offsets *o);

/* The bytes of _Py_DebugOffsets fp_py_offsets_debug needs at most. */
#define FP_PY_DEBUG_OFFSETS_MAX 1024

#endif
