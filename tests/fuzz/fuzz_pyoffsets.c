/* fuzz_pyoffsets.c: libFuzzer target for the parser of _Py_DebugOffsets
 * (device/pyoffsets.c), which reads bytes out of a profiled (possibly
 * hostile) process.  The input is parsed as it is, and a second time with
 * its first byte choosing an 8-byte member of a valid 3.13 blob (the values
 * of Debian trixie's 3.13.5, whose real bytes are in the corpus) that the
 * next 8 bytes replace, so that the range checks behind the cookie and
 * version are reached on every run.  Whatever it
 * accepts must hold for the BPF walker's windows. */
#include "pyoffsets.h"
#include "python.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void accepted(const struct fp_py_offsets *o)
{
	if (o->po_version != 0x030d || o->po_model != FP_PY_SHIM ||
	    o->po_cf_frame != FP_PY_NO_OFFSET)
		abort();
	if (o->po_fr_previous + 8 > FP_PY_FRAME_WINDOW || o->po_fr_code + 8 > FP_PY_FRAME_WINDOW ||
	    o->po_fr_instr + 8 > FP_PY_FRAME_WINDOW || o->po_fr_entry >= FP_PY_FRAME_WINDOW)
		abort();
	if (o->po_co_firstlineno + 8 > FP_PY_CODE_WINDOW ||
	    o->po_co_filename + 8 > FP_PY_CODE_WINDOW || o->po_co_name + 8 > FP_PY_CODE_WINDOW)
		abort();
	if (o->po_rt_interp_head == FP_PY_NO_OFFSET || o->po_is_threads_head == FP_PY_NO_OFFSET ||
	    o->po_ts_next == FP_PY_NO_OFFSET || o->po_ts_tid == FP_PY_NO_OFFSET ||
	    o->po_ts_frame == FP_PY_NO_OFFSET || o->po_co_code == FP_PY_NO_OFFSET ||
	    o->po_str_compact_size == FP_PY_NO_OFFSET)
		abort();
	if (o->po_str_length + 8 > o->po_str_ascii_size ||
	    o->po_str_ascii_size > o->po_str_compact_size)
		abort();
}

/* valid: a 3.13 _Py_DebugOffsets with the members the parser reads (byte
 * offset, value). */
static void valid(unsigned char *buf)
{
	static const uint64_t members[][2] = {
		{ 8, 0x030d05f0 }, { 40, 632 },  { 72, 7344 }, { 168, 8 },  { 184, 72 },
		{ 200, 160 },      { 232, 8 },   { 240, 0 },   { 248, 56 }, { 264, 70 },
		{ 280, 112 },      { 296, 128 }, { 304, 136 }, { 312, 68 }, { 344, 200 },
		{ 520, 16 },       { 528, 32 },  { 544, 32 },  { 552, 16 }, { 560, 40 },
	};

	memset(buf, 0, FP_PY_DEBUG_OFFSETS_MAX);
	memcpy(buf, "xdebugpy", 8);
	for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
		memcpy(buf + members[i][0], &members[i][1], 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char buf[FP_PY_DEBUG_OFFSETS_MAX];
	struct fp_py_offsets o;
	uint8_t *copy;

	/* Exactly size bytes, so that ASan sees any read past them. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (fp_py_offsets_debug(copy, size, &o) == 0)
		accepted(&o);
	free(copy);

	if (size >= 9) {
		size_t at = (size_t)data[0] * 8 % 584;

		valid(buf);
		memcpy(buf + at, data + 1, 8);
		if (fp_py_offsets_debug(buf, 584 + data[0] % 3, &o) == 0)
			accepted(&o);
	}
	return 0;
}
