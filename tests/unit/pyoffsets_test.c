/* pyoffsets_test.c: the per-version CPython offsets (device/pyoffsets.c):
 * which versions have a table entry, what the entries promise the BPF
 * walker, and the parser of 3.13's _Py_DebugOffsets on a blob laid out as
 * CPython 3.13 lays it out (the layout below; tests/e2e/pyoffsets_test.sh
 * parses the real one in a live process), truncated, with a wrong cookie,
 * version or free-threading flag, and with offsets out of range. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "batch.h"
#include "check.h"
#include "pyoffsets.h"
#include "python.h"

/* _Py_DebugOffsets of CPython 3.13 (3.13.0 and 3.13.5 alike), every
 * member after the cookie a uint64_t.  The offsets asserted below are those
 * `ptype /o _Py_DebugOffsets` prints for Debian trixie's python3.13. */
struct debug_offsets_313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct {
		uint64_t size, finalizing, interpreters_head;
	} runtime_state;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
			gil_runtime_state_locked, gil_runtime_state_holder;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			datastack_chunk, status;
	} thread_state;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct {
		uint64_t size, ob_type;
	} pyobject;
	struct {
		uint64_t size, tp_name, tp_repr, tp_flags;
	} type_object;
	struct {
		uint64_t size, ob_item, ob_size;
	} tuple_object;
	struct {
		uint64_t size, ob_item, ob_size;
	} list_object;
	struct {
		uint64_t size, ma_keys, ma_values;
	} dict_object;
	struct {
		uint64_t size, ob_fval;
	} float_object;
	struct {
		uint64_t size, lv_tag, ob_digit;
	} long_object;
	struct {
		uint64_t size, ob_size, ob_sval;
	} bytes_object;
	struct {
		uint64_t size, state, length, asciiobject_size;
	} unicode_object;
	struct {
		uint64_t size, collecting;
	} gc;
};

_Static_assert(sizeof(struct debug_offsets_313) == 584, "3.13 _Py_DebugOffsets size");
_Static_assert(offsetof(struct debug_offsets_313, runtime_state.interpreters_head) == 40, "");
_Static_assert(offsetof(struct debug_offsets_313, interpreter_state.threads_head) == 72, "");
_Static_assert(offsetof(struct debug_offsets_313, thread_state.next) == 168, "");
_Static_assert(offsetof(struct debug_offsets_313, thread_state.current_frame) == 184, "");
_Static_assert(offsetof(struct debug_offsets_313, thread_state.native_thread_id) == 200, "");
_Static_assert(offsetof(struct debug_offsets_313, interpreter_frame.previous) == 232, "");
_Static_assert(offsetof(struct debug_offsets_313, interpreter_frame.owner) == 264, "");
_Static_assert(offsetof(struct debug_offsets_313, code_object.filename) == 280, "");
_Static_assert(offsetof(struct debug_offsets_313, code_object.co_code_adaptive) == 344, "");
_Static_assert(offsetof(struct debug_offsets_313, bytes_object.ob_sval) == 528, "");
_Static_assert(offsetof(struct debug_offsets_313, unicode_object.asciiobject_size) == 560, "");

/* good_313: the _Py_DebugOffsets that Debian trixie's python3.13
 * (3.13.5-2+deb13u5) has in its _PyRuntime (gdb: print
 * _PyRuntime.debug_offsets), every member. */
static void good_313(struct debug_offsets_313 *d)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->cookie, "xdebugpy", 8);
	d->version = 0x030d05f0;
	d->free_threaded = 0;
	d->runtime_state.size = 283376;
	d->runtime_state.finalizing = 608;
	d->runtime_state.interpreters_head = 632;
	d->interpreter_state.size = 194976;
	d->interpreter_state.id = 7272;
	d->interpreter_state.next = 7264;
	d->interpreter_state.threads_head = 7344;
	d->interpreter_state.gc = 7400;
	d->interpreter_state.imports_modules = 7656;
	d->interpreter_state.sysdict = 7640;
	d->interpreter_state.builtins = 7648;
	d->interpreter_state.ceval_gil = 16;
	d->interpreter_state.gil_runtime_state = 7752;
	d->interpreter_state.gil_runtime_state_enabled = 0;
	d->interpreter_state.gil_runtime_state_locked = 7768;
	d->interpreter_state.gil_runtime_state_holder = 7760;
	d->thread_state.size = 304;
	d->thread_state.prev = 0;
	d->thread_state.next = 8;
	d->thread_state.interp = 16;
	d->thread_state.current_frame = 72;
	d->thread_state.thread_id = 152;
	d->thread_state.native_thread_id = 160;
	d->thread_state.datastack_chunk = 232;
	d->thread_state.status = 32;
	d->interpreter_frame.size = 80;
	d->interpreter_frame.previous = 8;
	d->interpreter_frame.executable = 0;
	d->interpreter_frame.instr_ptr = 56;
	d->interpreter_frame.localsplus = 72;
	d->interpreter_frame.owner = 70;
	d->code_object.size = 208;
	d->code_object.filename = 112;
	d->code_object.name = 120;
	d->code_object.qualname = 128;
	d->code_object.linetable = 136;
	d->code_object.firstlineno = 68;
	d->code_object.argcount = 52;
	d->code_object.localsplusnames = 96;
	d->code_object.localspluskinds = 104;
	d->code_object.co_code_adaptive = 200;
	d->pyobject.size = 16;
	d->pyobject.ob_type = 8;
	d->type_object.size = 416;
	d->type_object.tp_name = 24;
	d->type_object.tp_repr = 88;
	d->type_object.tp_flags = 168;
	d->tuple_object.size = 32;
	d->tuple_object.ob_item = 24;
	d->tuple_object.ob_size = 16;
	d->list_object.size = 40;
	d->list_object.ob_item = 24;
	d->list_object.ob_size = 16;
	d->dict_object.size = 48;
	d->dict_object.ma_keys = 32;
	d->dict_object.ma_values = 40;
	d->float_object.size = 24;
	d->float_object.ob_fval = 16;
	d->long_object.size = 32;
	d->long_object.lv_tag = 16;
	d->long_object.ob_digit = 24;
	d->bytes_object.size = 40;
	d->bytes_object.ob_size = 16;
	d->bytes_object.ob_sval = 32;
	d->unicode_object.size = 64;
	d->unicode_object.state = 32;
	d->unicode_object.length = 16;
	d->unicode_object.asciiobject_size = 40;
	d->gc.size = 240;
	d->gc.collecting = 200;
}

static int parse(const struct debug_offsets_313 *d, size_t len, struct fp_py_offsets *o)
{
	return fp_py_offsets_debug(d, len, o);
}

/* window_ok: what the BPF walker's fixed-size reads rely on. */
static void check_windows(const struct fp_py_offsets *o)
{
	unsigned instr = o->po_instr_kind == FP_PY_LASTI ? 4 : 8;

	CHECK(o->po_fr_previous + 8 <= FP_PY_FRAME_WINDOW);
	CHECK(o->po_fr_code + 8 <= FP_PY_FRAME_WINDOW);
	CHECK(o->po_fr_instr + instr <= FP_PY_FRAME_WINDOW);
	if (o->po_model == FP_PY_FRAMEOBJECT)
		CHECK_EQ_INT(o->po_fr_entry, FP_PY_NO_OFFSET);
	else
		CHECK(o->po_fr_entry < FP_PY_FRAME_WINDOW);
	CHECK(o->po_co_firstlineno + 8 <= FP_PY_CODE_WINDOW);
	CHECK(o->po_co_filename + 8 <= FP_PY_CODE_WINDOW);
	CHECK(o->po_co_name + 8 <= FP_PY_CODE_WINDOW);
	CHECK(o->po_str_length + 8 <= o->po_str_ascii_size);
	CHECK(o->po_str_ascii_size < o->po_str_compact_size);
	CHECK(o->po_bytes_size + 8 <= o->po_bytes_data);
}

static void test_table_versions(void)
{
	static const unsigned have[] = { 0x0309, 0x030b, 0x030c };
	static const unsigned lack[] = { 0,      0x0207, 0x0306, 0x0308,           0x030a, 0x030d,
					 0x030e, 0x030f, 0x0409, 0x0409 | 0x10000, 0xffff, 0x0903 };

	for (size_t i = 0; i < sizeof(have) / sizeof(have[0]); i++) {
		const struct fp_py_offsets *o = fp_py_offsets_for(have[i]);

		CHECK(o != NULL);
		if (o) {
			struct fp_py_offsets bad = *o;

			CHECK_EQ_INT(o->po_version, have[i]);
			check_windows(o);
			CHECK_EQ_INT(fp_py_offsets_check(o), 0);
			/* what the walker's masks cannot take is refused */
			bad.po_co_name += 4; /* a pointer off its alignment */
			CHECK_EQ_INT(fp_py_offsets_check(&bad), -EINVAL);
			bad = *o;
			bad.po_str_compact_size = 136; /* past the agent's str header */
			CHECK_EQ_INT(fp_py_offsets_check(&bad), -EINVAL);
		}
	}
	for (size_t i = 0; i < sizeof(lack) / sizeof(lack[0]); i++)
		CHECK(fp_py_offsets_for(lack[i]) == NULL);
}

static void test_table_models(void)
{
	const struct fp_py_offsets *o9 = fp_py_offsets_for(0x0309);
	const struct fp_py_offsets *o11 = fp_py_offsets_for(0x030b);
	const struct fp_py_offsets *o12 = fp_py_offsets_for(0x030c);

	if (!o9 || !o11 || !o12) {
		CHECK(0);
		return;
	}
	CHECK_EQ_INT(o9->po_model, FP_PY_FRAMEOBJECT);
	CHECK_EQ_INT(o9->po_tid_kind, FP_PY_TID_PTHREAD);
	CHECK_EQ_INT(o9->po_instr_kind, FP_PY_LASTI);
	CHECK_EQ_INT(o9->po_lines, FP_PY_LNOTAB);
	CHECK_EQ_INT(o9->po_cf_frame, FP_PY_NO_OFFSET);
	CHECK_EQ_INT(o9->po_co_code, 0);
	CHECK_EQ_INT(o11->po_model, FP_PY_IS_ENTRY);
	CHECK_EQ_INT(o12->po_model, FP_PY_SHIM);
	for (const struct fp_py_offsets *o = o11; o; o = o == o11 ? o12 : NULL) {
		CHECK_EQ_INT(o->po_tid_kind, FP_PY_TID_NATIVE);
		CHECK_EQ_INT(o->po_instr_kind, FP_PY_INSTR_PTR);
		CHECK_EQ_INT(o->po_lines, FP_PY_LOCATIONS);
		CHECK(o->po_cf_frame != FP_PY_NO_OFFSET);
		CHECK(o->po_co_code > o->po_co_linetable);
	}
	/* Spot checks against the DWARF (all of them: tests/e2e/pyoffsets_test.sh). */
	CHECK_EQ_INT(o9->po_ts_tid, 176);
	CHECK_EQ_INT(o9->po_fr_instr, 104);
	CHECK_EQ_INT(o11->po_fr_entry, 68);
	CHECK_EQ_INT(o11->po_co_code, 184);
	CHECK_EQ_INT(o12->po_fr_entry, 70);
	CHECK_EQ_INT(o12->po_is_threads_head, 72);
}

static void test_debug_good(void)
{
	struct debug_offsets_313 d;
	struct fp_py_offsets o;

	good_313(&d);
	memset(&o, 0xaa, sizeof(o));
	CHECK_EQ_INT(parse(&d, sizeof(d), &o), 0);
	CHECK_EQ_INT(o.po_version, 0x030d);
	CHECK_EQ_INT(o.po_model, FP_PY_SHIM);
	CHECK_EQ_INT(o.po_tid_kind, FP_PY_TID_NATIVE);
	CHECK_EQ_INT(o.po_instr_kind, FP_PY_INSTR_PTR);
	CHECK_EQ_INT(o.po_lines, FP_PY_LOCATIONS);
	CHECK_EQ_INT(o.po_rt_interp_head, 632);
	CHECK_EQ_INT(o.po_is_threads_head, 7344);
	CHECK_EQ_INT(o.po_ts_next, 8);
	CHECK_EQ_INT(o.po_ts_tid, 160);
	CHECK_EQ_INT(o.po_ts_frame, 72);
	CHECK_EQ_INT(o.po_cf_frame, FP_PY_NO_OFFSET);
	CHECK_EQ_INT(o.po_fr_previous, 8);
	CHECK_EQ_INT(o.po_fr_code, 0);
	CHECK_EQ_INT(o.po_fr_instr, 56);
	CHECK_EQ_INT(o.po_fr_entry, 70);
	CHECK_EQ_INT(o.po_co_firstlineno, 68);
	CHECK_EQ_INT(o.po_co_filename, 112);
	CHECK_EQ_INT(o.po_co_name, 128);
	CHECK_EQ_INT(o.po_co_linetable, 136);
	CHECK_EQ_INT(o.po_co_code, 200);
	CHECK_EQ_INT(o.po_bytes_size, 16);
	CHECK_EQ_INT(o.po_bytes_data, 32);
	CHECK_EQ_INT(o.po_str_state, 32);
	CHECK_EQ_INT(o.po_str_length, 16);
	CHECK_EQ_INT(o.po_str_ascii_size, 40);
	CHECK_EQ_INT(o.po_str_compact_size, 56);
	check_windows(&o);

	/* More bytes than the structure (the caller reads a fixed amount). */
	{
		unsigned char big[FP_PY_DEBUG_OFFSETS_MAX];

		CHECK(sizeof(d) <= sizeof(big));
		memset(big, 0x5a, sizeof(big));
		memcpy(big, &d, sizeof(d));
		CHECK_EQ_INT(fp_py_offsets_debug(big, sizeof(big), &o), 0);
	}
	/* Any 3.13 final release. */
	d.version = 0x030d00f0;
	CHECK_EQ_INT(parse(&d, sizeof(d), &o), 0);
	d.version = 0x030d0cf0;
	CHECK_EQ_INT(parse(&d, sizeof(d), &o), 0);
}

static void test_debug_truncated(void)
{
	struct debug_offsets_313 d;
	struct fp_py_offsets o, before;

	good_313(&d);
	memset(&before, 0x77, sizeof(before));
	for (size_t len = 0; len < sizeof(d); len++) {
		int err;

		o = before;
		err = parse(&d, len, &o);
		CHECK_EQ_INT(err, -EINVAL);
		CHECK(memcmp(&o, &before, sizeof(o)) == 0);
	}
	CHECK_EQ_INT(fp_py_offsets_debug(NULL, sizeof(d), &o), -EINVAL);
	CHECK_EQ_INT(fp_py_offsets_debug(&d, sizeof(d), NULL), -EINVAL);
}

static void test_debug_cookie(void)
{
	struct debug_offsets_313 d;
	struct fp_py_offsets o;

	for (size_t i = 0; i < 8; i++) {
		good_313(&d);
		d.cookie[i] ^= 0x20;
		CHECK_EQ_INT(parse(&d, sizeof(d), &o), -ENOENT);
	}
	memset(&d, 0, sizeof(d));
	CHECK_EQ_INT(parse(&d, sizeof(d), &o), -ENOENT);
}

static void test_debug_version(void)
{
	static const uint64_t bad[] = {
		0x030c07f0,                                   /* 3.12: no _Py_DebugOffsets at all */
		0x030e00f0,                                   /* 3.14: another layout */
		0x030e00a1, 0x040000f0, 0x030d00a6,           /* 3.13 pre-releases */
		0x030d00b1, 0x030d00c2, 0x1000000030d05f0ull, /* junk above PY_VERSION_HEX */
		0,          UINT64_MAX,
	};
	struct debug_offsets_313 d;
	struct fp_py_offsets o;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		good_313(&d);
		d.version = bad[i];
		CHECK_EQ_INT(parse(&d, sizeof(d), &o), -ENOTSUP);
	}
	good_313(&d);
	d.free_threaded = 1;
	CHECK_EQ_INT(parse(&d, sizeof(d), &o), -ENOTSUP);
	d.free_threaded = 1ull << 40;
	CHECK_EQ_INT(parse(&d, sizeof(d), &o), -ENOTSUP);
}

static void test_debug_ranges(void)
{
	struct debug_offsets_313 d;
	struct fp_py_offsets o;

#define EXPECT(field, value, want) \
	do { \
		good_313(&d); \
		d.field = (value); \
		CHECK_EQ_INT(parse(&d, sizeof(d), &o), (want)); \
	} while (0)

	/* Pointers in the frame: the whole pointer inside the window. */
	EXPECT(interpreter_frame.previous, FP_PY_FRAME_WINDOW - 8, 0);
	EXPECT(interpreter_frame.previous, FP_PY_FRAME_WINDOW - 7, -EINVAL);
	EXPECT(interpreter_frame.executable, FP_PY_FRAME_WINDOW, -EINVAL);
	EXPECT(interpreter_frame.instr_ptr, 1000, -EINVAL);
	EXPECT(interpreter_frame.owner, FP_PY_FRAME_WINDOW - 1, 0);
	EXPECT(interpreter_frame.owner, FP_PY_FRAME_WINDOW, -EINVAL);
	/* Code object fields read by the BPF walker. */
	EXPECT(code_object.qualname, FP_PY_CODE_WINDOW - 8, 0);
	EXPECT(code_object.qualname, FP_PY_CODE_WINDOW - 7, -EINVAL);
	EXPECT(code_object.filename, FP_PY_CODE_WINDOW, -EINVAL);
	EXPECT(code_object.firstlineno, FP_PY_CODE_WINDOW - 4, -EINVAL);
	/* Offsets that do not fit 16 bits, or are the "none" marker. */
	EXPECT(runtime_state.interpreters_head, 0xffff, -EINVAL);
	EXPECT(runtime_state.interpreters_head, 0x10000, -EINVAL);
	EXPECT(interpreter_state.threads_head, 1ull << 32, -EINVAL);
	EXPECT(thread_state.next, UINT64_MAX, -EINVAL);
	EXPECT(thread_state.native_thread_id, 0x1ffff, -EINVAL);
	EXPECT(thread_state.current_frame, 0xfffe, 0);
	EXPECT(code_object.co_code_adaptive, 0x12345678, -EINVAL);
	EXPECT(code_object.linetable, 0xffff, -EINVAL);
	/* Object layouts that cannot be. */
	EXPECT(unicode_object.asciiobject_size, 0xfff8, -EINVAL);
	EXPECT(unicode_object.asciiobject_size, 8, -EINVAL);
	EXPECT(unicode_object.length, 40, -EINVAL);
	EXPECT(unicode_object.state, 0, -EINVAL);
	EXPECT(bytes_object.ob_sval, 8, -EINVAL);
	EXPECT(bytes_object.ob_size, 0, -EINVAL);
	/* Fields the parser does not read may hold anything. */
	EXPECT(gc.collecting, UINT64_MAX, 0);
	EXPECT(thread_state.thread_id, UINT64_MAX, 0);
	EXPECT(code_object.name, UINT64_MAX, 0);
#undef EXPECT
}

int main(void)
{
	RUN(test_table_versions);
	RUN(test_table_models);
	RUN(test_debug_good);
	RUN(test_debug_truncated);
	RUN(test_debug_cookie);
	RUN(test_debug_version);
	RUN(test_debug_ranges);
	return CHECK_DONE();
}
