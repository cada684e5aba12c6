/* pyoffsets.c: per-version CPython offsets (see pyoffsets.h).
 *
 * Where the numbers come from.  Every table entry was read with gdb
 * (`print &((T *)0)->field`, `ptype /o T`) from the DWARF of a real build,
 * and tests/e2e/pyoffsets_test.sh reads them again from the same DWARF
 * (tests/python/dwarf_offsets.sh; the trees come from tests/python/fetch.sh)
 * and compares:
 *
 *   3.9   Debian bullseye python3.9 3.9.2-1, DWARF from python3.9-dbg
 *         (/usr/lib/debug/.build-id/f9/02f8a561...debug, build-ID of
 *         /usr/bin/python3.9 f902f8a561c3abdb9c8d8c859d4243bd8c3f928f)
 *   3.11  Debian bookworm python3.11 3.11.2-6+deb12u8, DWARF from
 *         python3.11-dbg (build-ID 2dd439c6335b443668ce8099c87b26a093da08b0)
 *   3.12  no Debian suite has 3.12: pyenv's 3.12.1, built from CPython's
 *         source with gcc 12 (x86-64), whose libpython3.12.so.1.0 carries
 *         its DWARF (build-ID f9d5c82f5f2c22df68c1d49c944ef3dee5103dcc);
 *         the same numbers follow from the 3.12 headers (struct _ts,
 *         _PyCFrame, _PyInterpreterFrame, PyCodeObject) on LP64
 *   3.13  not in the table: _Py_DebugOffsets (below).  Its layout was read
 *         from the DWARF of Debian trixie's python3.13 3.13.5-2+deb13u5
 *         (python3.13-dbg, `ptype /o _Py_DebugOffsets`) and is the same in
 *         pyenv's 3.13.0; the values parsed from the bytes of a live
 *         process's _PyRuntime are compared with that DWARF by the e2e test.
 *
 * Fields per version (struct.member as in CPython's headers):
 *
 *   po_rt_interp_head   _PyRuntimeState.interpreters.head
 *   po_is_threads_head  PyInterpreterState.tstate_head (3.9), .threads.head
 *   po_ts_next          PyThreadState.next
 *   po_ts_tid           PyThreadState.thread_id (3.9: pthread_self()),
 *                       .native_thread_id (3.11+: gettid(); 3.11 has it)
 *   po_ts_frame         PyThreadState.frame (3.9), .cframe (3.11, 3.12)
 *   po_cf_frame         _PyCFrame.current_frame (3.11, 3.12)
 *   po_fr_previous      PyFrameObject.f_back (3.9), _PyInterpreterFrame.previous
 *   po_fr_code          PyFrameObject.f_code (3.9), _PyInterpreterFrame.f_code
 *   po_fr_instr         PyFrameObject.f_lasti (3.9, int), .prev_instr (3.11, 3.12)
 *   po_fr_entry         _PyInterpreterFrame.is_entry (3.11, bool), .owner
 *                       (3.12, char)
 *   po_co_*             PyCodeObject.co_firstlineno, co_filename, co_name
 *                       (3.9) or co_qualname, co_lnotab (3.9) or
 *                       co_linetable, co_code_adaptive (3.11+)
 *   po_bytes_*          PyBytesObject.ob_base.ob_size, ob_sval
 *   po_str_*            PyASCIIObject.state, .length, sizeof(PyASCIIObject),
 *                       sizeof(PyCompactUnicodeObject)
 *
 * The state bit field of str objects (PyASCIIObject.state, an unsigned int
 * at po_str_state; bit positions from DWARF, DW_AT_data_bit_offset, the
 * same in all four versions): interned bits 0-1, kind bits 2-4 (1, 2 or 4
 * bytes per code point), compact bit 5, ascii bit 6; bit 7 is ready in
 * 3.9 and 3.11 and statically_allocated in 3.12 and 3.13.  A compact ASCII
 * str keeps its characters right after the PyASCIIObject
 * (po_str_ascii_size), any other compact str right after the
 * PyCompactUnicodeObject (po_str_compact_size).  3.9 and 3.11 still have
 * the wstr pointer, so those sizes are 48 and 72; 3.12 and 3.13: 40 and 56.
 */
#include "pyoffsets.h"

#include <errno.h>
#include <string.h>

#include "batch.h"
#include "python.h"

static const struct fp_py_offsets table[] = {
	{
		.po_version = 0x0309,
		.po_model = FP_PY_FRAMEOBJECT,
		.po_tid_kind = FP_PY_TID_PTHREAD,
		.po_instr_kind = FP_PY_LASTI,
		.po_lines = FP_PY_LNOTAB,
		.po_rt_interp_head = 32,
		.po_is_threads_head = 8,
		.po_ts_next = 8,
		.po_ts_tid = 176,
		.po_ts_frame = 24,
		.po_cf_frame = FP_PY_NO_OFFSET,
		.po_fr_previous = 24,
		.po_fr_code = 32,
		.po_fr_instr = 104,
		.po_fr_entry = FP_PY_NO_OFFSET,
		.po_co_firstlineno = 40,
		.po_co_filename = 104,
		.po_co_name = 112,
		.po_co_linetable = 120,
		.po_co_code = 0,
		.po_bytes_size = 16,
		.po_bytes_data = 32,
		.po_str_state = 32,
		.po_str_length = 16,
		.po_str_ascii_size = 48,
		.po_str_compact_size = 72,
	},
	{
		.po_version = 0x030b,
		.po_model = FP_PY_IS_ENTRY,
		.po_tid_kind = FP_PY_TID_NATIVE,
		.po_instr_kind = FP_PY_INSTR_PTR,
		.po_lines = FP_PY_LOCATIONS,
		.po_rt_interp_head = 40,
		.po_is_threads_head = 16,
		.po_ts_next = 8,
		.po_ts_tid = 160,
		.po_ts_frame = 56,
		.po_cf_frame = 8,
		.po_fr_previous = 48,
		.po_fr_code = 32,
		.po_fr_instr = 56,
		.po_fr_entry = 68,
		.po_co_firstlineno = 72,
		.po_co_filename = 112,
		.po_co_name = 128,
		.po_co_linetable = 136,
		.po_co_code = 184,
		.po_bytes_size = 16,
		.po_bytes_data = 32,
		.po_str_state = 32,
		.po_str_length = 16,
		.po_str_ascii_size = 48,
		.po_str_compact_size = 72,
	},
	{
		.po_version = 0x030c,
		.po_model = FP_PY_SHIM,
		.po_tid_kind = FP_PY_TID_NATIVE,
		.po_instr_kind = FP_PY_INSTR_PTR,
		.po_lines = FP_PY_LOCATIONS,
		.po_rt_interp_head = 40,
		.po_is_threads_head = 72,
		.po_ts_next = 8,
		.po_ts_tid = 144,
		.po_ts_frame = 56,
		.po_cf_frame = 0,
		.po_fr_previous = 8,
		.po_fr_code = 0,
		.po_fr_instr = 56,
		.po_fr_entry = 70,
		.po_co_firstlineno = 68,
		.po_co_filename = 112,
		.po_co_name = 128,
		.po_co_linetable = 136,
		.po_co_code = 192,
		.po_bytes_size = 16,
		.po_bytes_data = 32,
		.po_str_state = 32,
		.po_str_length = 16,
		.po_str_ascii_size = 40,
		.po_str_compact_size = 56,
	},
};

const struct fp_py_offsets *fp_py_offsets_for(unsigned version)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].po_version == version)
			return &table[i];
	return NULL;
}

/* _Py_DebugOffsets of CPython 3.13 (Include/internal/pycore_runtime.h):
 * every member after the cookie is a uint64_t; byte offsets from the start
 * of the structure (= of _PyRuntime), as DWARF has them for 3.13.0 and
 * 3.13.5.  Only what is read is listed.  sizeof is 584. */
#define DO_COOKIE 0
#define DO_VERSION 8        /* PY_VERSION_HEX of the build */
#define DO_FREE_THREADED 16 /* 3.13.0 and later */
#define DO_RT_INTERPRETERS_HEAD 40
#define DO_IS_THREADS_HEAD 72
#define DO_TS_NEXT 168
#define DO_TS_CURRENT_FRAME 184
#define DO_TS_NATIVE_THREAD_ID 200
#define DO_FR_PREVIOUS 232
#define DO_FR_EXECUTABLE 240
#define DO_FR_INSTR_PTR 248
#define DO_FR_OWNER 264
#define DO_CO_FILENAME 280
#define DO_CO_QUALNAME 296
#define DO_CO_LINETABLE 304
#define DO_CO_FIRSTLINENO 312
#define DO_CO_CODE_ADAPTIVE 344
#define DO_BYTES_OB_SIZE 520
#define DO_BYTES_OB_SVAL 528
#define DO_STR_STATE 544
#define DO_STR_LENGTH 552
#define DO_STR_ASCIIOBJECT_SIZE 560
#define DO_SIZE_313 584

/* PyCompactUnicodeObject adds utf8_length and utf8 (two 8-byte members) to
 * PyASCIIObject in 3.12 and 3.13 (DWARF: 56 = 40 + 16); _Py_DebugOffsets
 * does not carry its size. */
#define COMPACT_EXTRA 16

#define DEBUG_COOKIE "xdebugpy"

static uint64_t get64(const unsigned char *p, size_t off)
{
	uint64_t v;

	memcpy(&v, p + off, sizeof(v));
	return v;
}

/* take: the uint64_t at off as a 16-bit offset; -EINVAL when it cannot be
 * one (FP_PY_NO_OFFSET is not an offset either). */
static int take(const unsigned char *p, size_t off, uint16_t *out)
{
	uint64_t v = get64(p, off);

	if (v >= FP_PY_NO_OFFSET)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

/* field_in: the size bytes at off lie within a window of win bytes. */
static int field_in(unsigned off, unsigned size, unsigned win)
{
	return off != FP_PY_NO_OFFSET && off + size <= win;
}

/* aligned: the field at off of size bytes lies in a window of win bytes
 * and on a multiple of its size, as the BPF walker's masks need. */
static int aligned(unsigned off, unsigned size, unsigned win)
{
	return field_in(off, size, win) && off % size == 0;
}

int fp_py_offsets_check(const struct fp_py_offsets *o)
{
	if (o->po_model < FP_PY_FRAMEOBJECT || o->po_model > FP_PY_SHIM ||
	    (o->po_instr_kind != FP_PY_LASTI && o->po_instr_kind != FP_PY_INSTR_PTR))
		return -EINVAL;
	/* frame and code object fields, read through the walker's windows */
	if (!aligned(o->po_fr_previous, 8, FP_PY_FRAME_WINDOW) ||
	    !aligned(o->po_fr_code, 8, FP_PY_FRAME_WINDOW) ||
	    !field_in(o->po_fr_instr, 8, FP_PY_FRAME_WINDOW) ||
	    o->po_fr_instr % (o->po_instr_kind == FP_PY_LASTI ? 4 : 8))
		return -EINVAL;
	if (o->po_model != FP_PY_FRAMEOBJECT && !field_in(o->po_fr_entry, 1, FP_PY_FRAME_WINDOW))
		return -EINVAL;
	if (!aligned(o->po_co_firstlineno, 4, FP_PY_CODE_WINDOW) ||
	    !field_in(o->po_co_firstlineno, 8, FP_PY_CODE_WINDOW) ||
	    !aligned(o->po_co_filename, 8, FP_PY_CODE_WINDOW) ||
	    !aligned(o->po_co_name, 8, FP_PY_CODE_WINDOW) ||
	    !aligned(o->po_co_linetable, 8, FP_PY_CODE_WINDOW))
		return -EINVAL;
	if (o->po_rt_interp_head == FP_PY_NO_OFFSET || o->po_is_threads_head == FP_PY_NO_OFFSET ||
	    o->po_ts_next == FP_PY_NO_OFFSET || o->po_ts_tid == FP_PY_NO_OFFSET ||
	    o->po_ts_frame == FP_PY_NO_OFFSET)
		return -EINVAL;
	if (o->po_instr_kind == FP_PY_INSTR_PTR && o->po_co_code == FP_PY_NO_OFFSET)
		return -EINVAL;
	/* An object starts with its 16-byte header; a str's length and state
	 * lie inside the PyASCIIObject, which the compact form extends.  The
	 * agent reads a bytes header of 64 bytes and a str header of 128; the
	 * walker reads a name's length and first 16 characters in one window. */
	if (o->po_bytes_size < 16 || o->po_bytes_size + 8 > o->po_bytes_data ||
	    o->po_bytes_data > 64)
		return -EINVAL;
	if (o->po_str_length < 16 || o->po_str_length % 8 ||
	    o->po_str_length + 8 > o->po_str_ascii_size || o->po_str_ascii_size % 8 ||
	    o->po_str_state < 16 || o->po_str_state + 4 > o->po_str_ascii_size ||
	    o->po_str_ascii_size - o->po_str_length + 16 > FP_PY_NAME_WINDOW ||
	    o->po_str_ascii_size > o->po_str_compact_size || o->po_str_compact_size > 128)
		return -EINVAL;
	return 0;
}

int fp_py_offsets_debug(const void *buf, size_t len, struct fp_py_offsets *out)
{
	static const size_t fields[] = {
		DO_RT_INTERPRETERS_HEAD, DO_IS_THREADS_HEAD,  DO_TS_NEXT,
		DO_TS_NATIVE_THREAD_ID,  DO_TS_CURRENT_FRAME, DO_FR_PREVIOUS,
		DO_FR_EXECUTABLE,        DO_FR_INSTR_PTR,     DO_FR_OWNER,
		DO_CO_FIRSTLINENO,       DO_CO_FILENAME,      DO_CO_QUALNAME,
		DO_CO_LINETABLE,         DO_CO_CODE_ADAPTIVE, DO_BYTES_OB_SIZE,
		DO_BYTES_OB_SVAL,        DO_STR_STATE,        DO_STR_LENGTH,
		DO_STR_ASCIIOBJECT_SIZE,
	};
	uint16_t *dst[sizeof(fields) / sizeof(fields[0])];
	const unsigned char *p = buf;
	struct fp_py_offsets o;
	uint64_t version;
	size_t i;
	int err;

	if (!buf || !out || len < DO_FREE_THREADED + 8)
		return -EINVAL;
	if (memcmp(p + DO_COOKIE, DEBUG_COOKIE, 8) != 0)
		return -ENOENT;
	/* PY_VERSION_HEX: major, minor, micro, then release level and serial.
	 * The layout above is that of 3.13.0 final and later 3.13 releases;
	 * pre-releases of 3.13 had other ones, 3.14 has another. */
	version = get64(p, DO_VERSION);
	if (version >> 16 != 0x030d || (version & 0xf0) != 0xf0)
		return -ENOTSUP;
	if (get64(p, DO_FREE_THREADED) != 0)
		return -ENOTSUP;
	if (len < DO_SIZE_313)
		return -EINVAL;

	memset(&o, 0, sizeof(o));
	o.po_version = 0x030d;
	o.po_model = FP_PY_SHIM;
	o.po_tid_kind = FP_PY_TID_NATIVE;
	o.po_instr_kind = FP_PY_INSTR_PTR;
	o.po_lines = FP_PY_LOCATIONS;
	o.po_cf_frame = FP_PY_NO_OFFSET;
	i = 0;
	dst[i++] = &o.po_rt_interp_head;
	dst[i++] = &o.po_is_threads_head;
	dst[i++] = &o.po_ts_next;
	dst[i++] = &o.po_ts_tid;
	dst[i++] = &o.po_ts_frame;
	dst[i++] = &o.po_fr_previous;
	dst[i++] = &o.po_fr_code;
	dst[i++] = &o.po_fr_instr;
	dst[i++] = &o.po_fr_entry;
	dst[i++] = &o.po_co_firstlineno;
	dst[i++] = &o.po_co_filename;
	dst[i++] = &o.po_co_name;
	dst[i++] = &o.po_co_linetable;
	dst[i++] = &o.po_co_code;
	dst[i++] = &o.po_bytes_size;
	dst[i++] = &o.po_bytes_data;
	dst[i++] = &o.po_str_state;
	dst[i++] = &o.po_str_length;
	dst[i++] = &o.po_str_ascii_size;
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		err = take(p, fields[i], dst[i]);
		if (err)
			return err;
	}
	if (o.po_str_ascii_size > FP_PY_NO_OFFSET - 1 - COMPACT_EXTRA)
		return -EINVAL;
	o.po_str_compact_size = o.po_str_ascii_size + COMPACT_EXTRA;
	err = fp_py_offsets_check(&o);
	if (err)
		return err;
	*out = o;
	return 0;
}
