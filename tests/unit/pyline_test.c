/* pyline_test.c: line numbers and same-line runs from CPython line tables
 * (common/pyline.c).
 *
 * The vectors of pyline_vectors.h are CPython's own: tables, the line of
 * every code unit and where instructions start, printed by CPython 3.11
 * (pyline_vectors.py).  The hand-made cases below cover 3.9's co_lnotab
 * layout and damaged tables. */
#include "check.h"

#include "batch.h"
#include "pyline.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pyline_vectors.h"

#define NOT_CHECKED UINT32_MAX

/* Every code unit of every code object of the sample module, at its even
 * offset and at the odd byte after it, then one past the code's end. */
static void test_cpython_vectors(void)
{
	size_t v, i, checked = 0, locations = 0, lnotab = 0;

	for (v = 0; v < sizeof(py_vectors) / sizeof(py_vectors[0]); v++) {
		const struct py_vector *pv = &py_vectors[v];
		int bad = 0;

		for (i = 0; i < pv->nunits; i++) {
			uint32_t want = pv->lines[i];

			if (want == NOT_CHECKED)
				continue;
			if (fp_pyline(pv->format, pv->table, pv->len, pv->firstlineno, 2 * i) !=
				    want ||
			    fp_pyline(pv->format, pv->table, pv->len, pv->firstlineno, 2 * i + 1) !=
				    want) {
				if (!bad++)
					fprintf(stderr,
						"  %s (format %u): offset %zu: line %u, want %u\n",
						pv->name, pv->format, 2 * i,
						fp_pyline(pv->format, pv->table, pv->len,
							  pv->firstlineno, 2 * i),
						want);
			}
			checked++;
		}
		CHECK_EQ_INT(bad, 0);
		if (pv->format == FP_PY_LOCATIONS) {
			/* The table covers the code exactly: nothing after it. */
			CHECK_EQ_INT(fp_pyline(pv->format, pv->table, pv->len, pv->firstlineno,
					       2 * pv->nunits),
				     0);
			locations++;
		} else {
			lnotab++;
		}
	}
	CHECK(locations >= 14 && lnotab == locations);
	CHECK(checked > 1900);
	printf("  %zu code objects, %zu offsets checked\n", locations, checked);
}

/* Lines the vectors must show, so that a generator change cannot quietly
 * drop what they are for. */
static void test_vectors_cover(void)
{
	int far = 0, big = 0, none = 0, back = 0;
	size_t v, i;

	for (v = 0; v < sizeof(py_vectors) / sizeof(py_vectors[0]); v++) {
		const struct py_vector *pv = &py_vectors[v];

		if (pv->format != FP_PY_LOCATIONS)
			continue;
		for (i = 0; i < pv->nunits; i++) {
			none |= pv->lines[i] == 0 && strcmp(pv->name, "<module>") != 0;
			if (i && pv->lines[i] && pv->lines[i - 1] &&
			    pv->lines[i] < pv->lines[i - 1])
				back |= !strcmp(pv->name, "call_back");
		}
		if (!strcmp(pv->name, "far"))
			far = pv->lines[pv->nunits - 1] - pv->firstlineno > 300;
		if (!strcmp(pv->name, "big"))
			big = pv->nunits * 2 > 255;
	}
	CHECK(far);  /* a line delta of two svarint bytes */
	CHECK(big);  /* lnotab byte increments over 255 */
	CHECK(none); /* entries without a location */
	CHECK(back); /* negative line deltas */
}

/* 3.9's co_lnotab, by its definition (Objects/lnotab_notes.txt): code at
 * byte offsets 0, 6, 50, 350 and 361 on lines 1, 2, 7, 207 and 206.  The
 * 300-byte and 200-line step is split into (255, 0), (45, 127), (0, 73);
 * -1 is the byte 0xff. */
static void test_lnotab_notes_example(void)
{
	static const uint8_t tab[] = { 6, 1, 44, 5, 255, 0, 45, 127, 0, 73, 11, 0xff };
	static const struct {
		uint64_t offset;
		uint32_t line;
	} want[] = {
		{ 0, 1 },          { 5, 1 },
		{ 6, 2 },          { 49, 2 },
		{ 50, 7 },         { 304, 7 },
		{ 305, 7 },        { 349, 7 },
		{ 350, 207 },      { 360, 207 },
		{ 361, 206 },      { 400, 206 },
		{ 1u << 20, 206 }, { FP_PY_OFFSET_UNKNOWN, 206 },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, tab, sizeof(tab), 1, want[i].offset),
			     want[i].line);
	/* A trailing odd byte is half a pair: ignored. */
	uint8_t odd[sizeof(tab) + 1];
	memcpy(odd, tab, sizeof(tab));
	odd[sizeof(tab)] = 3;
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, odd, sizeof(odd), 1, 400), 206);
	/* Nothing read past the length given. */
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, tab, 4, 1, 400), 7);
	/* An empty table: every instruction on the first line. */
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, NULL, 0, 42, 0), 42);
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, tab, 0, 42, 100), 42);
}

static void test_lnotab_out_of_range(void)
{
	static const uint8_t down[] = { 2, 0x80, 2, 0x80 }; /* -128 twice */
	static const uint8_t up[] = { 0, 127 };

	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, down, sizeof(down), 200, 0), 200);
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, down, sizeof(down), 200, 2), 72);
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, down, sizeof(down), 200, 4), 0); /* line -56 */
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, up, sizeof(up), UINT32_MAX - 1, 0), 0);
	CHECK_EQ_INT(fp_pyline(FP_PY_LNOTAB, up, sizeof(up), INT32_MAX - 127, 0), INT32_MAX);
}

/* 3.11+ location entries built by hand from Objects/locations.md.  A
 * header byte is 0x80 | code << 3 | (units - 1). */
static void test_locations_forms(void)
{
	static const uint8_t tab[] = {
		0x80, 0x00,       /* short form (code 0), 1 unit: line 10 */
		0xd3, 0x04, 0x09, /* one-line form +0 (code 10), 4 units, columns 4-9 */
		0xf8,             /* code 15, 1 unit: no location (line stays 10) */
		0xe9, 0x05,       /* no columns (13), 2 units, svarint 5 = -2: line 8 */
		0xf0, 0x48, 0x06, 0x00, 0x05, 0x08,
		/* long form (14), 1 unit: svarint 0x08 | 0x06 << 6 = 392 = +196:
		 * line 204; end line +0, columns 4-7 */
		0xe8, 0x00,       /* no columns, 1 unit, +0: 204 */
		0xcf, 0x75,       /* short form (code 9), 8 units, same line */
		0xe7, 0x05, 0x06, /* one-line form +2 (code 12), 8 units: 206 */
	};
	static const struct {
		uint64_t offset;
		uint32_t line;
	} want[] = {
		{ 0, 10 },   { 1, 10 },   { 2, 10 },   { 9, 10 },
		{ 10, 0 },   { 11, 0 },   { 12, 8 },   { 15, 8 },
		{ 16, 204 }, { 18, 204 }, { 20, 204 }, { 35, 204 },
		{ 36, 206 }, { 51, 206 }, { 52, 0 },   { FP_PY_OFFSET_UNKNOWN, 0 },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint32_t got = fp_pyline(FP_PY_LOCATIONS, tab, sizeof(tab), 10, want[i].offset);
		if (got != want[i].line)
			fprintf(stderr, "  offset %llu: line %u, want %u\n",
				(unsigned long long)want[i].offset, got, want[i].line);
		CHECK_EQ_INT(got, want[i].line);
	}
	/* One-line forms move the line by their code minus 10. */
	static const uint8_t one_line[] = { 0xd0, 0x01, 0x02, 0xd8, 0x01, 0x02, 0xe0, 0x01, 0x02 };
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, one_line, sizeof(one_line), 5, 0), 5);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, one_line, sizeof(one_line), 5, 2), 6);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, one_line, sizeof(one_line), 5, 4), 8);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, one_line, sizeof(one_line), 5, 6), 0);
}

/* Damaged tables: an answer, never a read past the end. */
static void test_locations_damaged(void)
{
	/* The table ends inside a varint: the entry has no line. */
	static const uint8_t cut[] = { 0x80, 0x00, 0xe8, 0x42 };
	/* A varint chunk with bit 7: the next header came too early. */
	static const uint8_t early[] = { 0x80, 0x00, 0xe8, 0x80, 0x00 };
	/* Payload where the first header belongs. */
	static const uint8_t headless[] = { 0x05, 0x80, 0x00 };
	/* A varint of 36 bits. */
	static const uint8_t huge[] = { 0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f };
	/* A delta that takes the line below 1, then back. */
	static const uint8_t below[] = { 0xe8, 0x0b, 0xe8, 0x0c };
	uint8_t *heap;

	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, cut, sizeof(cut), 7, 0), 7);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, cut, sizeof(cut), 7, 2), 0);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, early, sizeof(early), 7, 2), 0);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, headless, sizeof(headless), 7, 0), 0);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, huge, sizeof(huge), 7, 0), 0);
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, below, sizeof(below), 3, 0), 0); /* 3 - 5 */
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, below, sizeof(below), 3, 2), 4); /* -2 + 6 */
	CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, NULL, 0, 7, 0), 0);
	CHECK_EQ_INT(fp_pyline(0, cut, sizeof(cut), 7, 0), 0);
	CHECK_EQ_INT(fp_pyline(3, cut, sizeof(cut), 7, 0), 0);
	/* Exactly sized heap copies, so that ASan sees any over-read. */
	heap = malloc(sizeof(cut));
	if (!heap)
		abort();
	memcpy(heap, cut, sizeof(cut));
	for (uint64_t off = 0; off < 8; off++)
		CHECK(fp_pyline(FP_PY_LOCATIONS, heap, sizeof(cut), 7, off) <= 7);
	for (uint64_t off = 0; off < 8; off++)
		CHECK(fp_pyline(FP_PY_LNOTAB, heap, sizeof(cut) - 1, 7, off) <= 0x80 + 7);
	free(heap);
}

/* The agent sends a frame's offset folded to the start of its run: for
 * every offset of every vector (even and odd bytes), the run holds it, the
 * symbolizer's line for the run's start is its line for the offset, the
 * start is where an instruction starts, and the run is as long as it can
 * be (the offsets just outside it are on other lines, or in no run). */
static void test_runs_fold_same_line(void)
{
	size_t v, checked = 0, offsets = 0, starts = 0;

	for (v = 0; v < sizeof(py_vectors) / sizeof(py_vectors[0]); v++) {
		const struct py_vector *pv = &py_vectors[v];
		uint64_t last_start = UINT64_MAX;
		int bad = 0;

		for (uint64_t off = 0; off < 2 * pv->nunits; off++) {
			struct fp_pyline_run r, next;
			uint32_t line = fp_pyline(pv->format, pv->table, pv->len, pv->firstlineno,
						  off);

			if (fp_pyline_run(pv->format, pv->table, pv->len, pv->firstlineno, off,
					  &r)) {
				bad++;
				continue;
			}
			bad += !(r.pr_start <= off && off < r.pr_end);
			bad += r.pr_line != line;
			bad += fp_pyline(pv->format, pv->table, pv->len, pv->firstlineno,
					 r.pr_start) != line;
			bad += r.pr_start >= 2 * pv->nunits || !pv->starts[r.pr_start / 2] ||
			       r.pr_start % 2;
			if (r.pr_start)
				bad += fp_pyline(pv->format, pv->table, pv->len, pv->firstlineno,
						 r.pr_start - 1) == line;
			if (r.pr_end != UINT64_MAX &&
			    !fp_pyline_run(pv->format, pv->table, pv->len, pv->firstlineno,
					   r.pr_end, &next))
				bad += next.pr_line == line || next.pr_start != r.pr_end;
			if (bad && !checked)
				fprintf(stderr,
					"  %s (format %u): offset %llu: run [%llu, %llu) line %u\n",
					pv->name, pv->format, (unsigned long long)off,
					(unsigned long long)r.pr_start,
					(unsigned long long)r.pr_end, r.pr_line);
			starts += r.pr_start != last_start;
			last_start = r.pr_start;
			checked++;
		}
		offsets += 2 * pv->nunits;
		CHECK_EQ_INT(bad, 0);
	}
	CHECK_EQ_INT(checked, offsets);
	/* Folding is what the agent does it for: far fewer distinct offsets. */
	CHECK(starts * 3 < offsets / 2);
	printf("  %zu offsets, %zu code units, %zu runs\n", offsets, offsets / 2, starts);
}

/* The iterator's runs: from offset 0, each where the one before ended, no
 * two in a row on the same line; a 3.11+ table's runs end where the code
 * does, a 3.9 table's last run never ends. */
static void test_runs_iterate(void)
{
	for (size_t v = 0; v < sizeof(py_vectors) / sizeof(py_vectors[0]); v++) {
		const struct py_vector *pv = &py_vectors[v];
		struct fp_pyline_iter it;
		struct fp_pyline_run r, prev = { 0, 0, UINT32_MAX };
		int bad = 0, n = 0;

		fp_pyline_iter_init(&it, pv->format, pv->table, pv->len, pv->firstlineno);
		while (fp_pyline_iter_next(&it, &r)) {
			bad += r.pr_start != prev.pr_end || r.pr_end <= r.pr_start ||
			       r.pr_line == prev.pr_line;
			prev = r;
			n++;
		}
		CHECK_EQ_INT(bad, 0);
		CHECK(n > 0);
		if (pv->format == FP_PY_LOCATIONS)
			CHECK_EQ_INT(prev.pr_end, 2 * pv->nunits);
		else
			CHECK(prev.pr_end == UINT64_MAX);
		CHECK_EQ_INT(fp_pyline_iter_next(&it, &r), 0);
	}
}

/* Runs of the hand-made tables: 3.9's split step joins two pairs on line
 * 7; a 3.11+ "no location" entry is a run of its own, and entries past a
 * malformed one, or past the table's end, are in no run. */
static void test_runs_forms(void)
{
	static const uint8_t lnotab[] = { 6, 1, 44, 5, 255, 0, 45, 127, 0, 73, 11, 0xff };
	static const uint8_t loc[] = {
		0x80, 0x00,       /* 1 unit, line 10 */
		0xd3, 0x04, 0x09, /* 4 units, line 10 */
		0xf8,             /* 1 unit, no location */
		0xe9, 0x05,       /* 2 units, line 8 */
		0xe8, 0x00,       /* 1 unit, line 8 */
		0xe8, 0x42,       /* the table ends inside the varint */
	};
	struct fp_pyline_run r;

	CHECK_EQ_INT(fp_pyline_run(FP_PY_LNOTAB, lnotab, sizeof(lnotab), 1, 100, &r), 0);
	CHECK(r.pr_start == 50 && r.pr_end == 350 && r.pr_line == 7);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LNOTAB, lnotab, sizeof(lnotab), 1, 360, &r), 0);
	CHECK(r.pr_start == 350 && r.pr_end == 361 && r.pr_line == 207);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LNOTAB, lnotab, sizeof(lnotab), 1, FP_PY_OFFSET_UNKNOWN,
				   &r),
		     0);
	CHECK(r.pr_start == 361 && r.pr_end == UINT64_MAX && r.pr_line == 206);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LNOTAB, NULL, 0, 42, 7, &r), 0);
	CHECK(r.pr_start == 0 && r.pr_end == UINT64_MAX && r.pr_line == 42);

	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, loc, sizeof(loc), 10, 9, &r), 0);
	CHECK(r.pr_start == 0 && r.pr_end == 10 && r.pr_line == 10);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, loc, sizeof(loc), 10, 11, &r), 0);
	CHECK(r.pr_start == 10 && r.pr_end == 12 && r.pr_line == 0);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, loc, sizeof(loc), 10, 17, &r), 0);
	CHECK(r.pr_start == 12 && r.pr_end == 18 && r.pr_line == 8);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, loc, sizeof(loc), 10, 18, &r), -ENOENT);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, loc, 10, 10, 17, &r), 0);
	CHECK(r.pr_start == 12 && r.pr_end == 18 && r.pr_line == 8);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, loc, 10, 10, 18, &r), -ENOENT);
	CHECK_EQ_INT(fp_pyline_run(FP_PY_LOCATIONS, NULL, 0, 10, 0, &r), -ENOENT);
	CHECK_EQ_INT(fp_pyline_run(3, loc, sizeof(loc), 10, 0, &r), -ENOENT);
}

int main(void)
{
	RUN(test_cpython_vectors);
	RUN(test_vectors_cover);
	RUN(test_lnotab_notes_example);
	RUN(test_lnotab_out_of_range);
	RUN(test_locations_forms);
	RUN(test_locations_damaged);
	RUN(test_runs_fold_same_line);
	RUN(test_runs_iterate);
	RUN(test_runs_forms);
	return CHECK_DONE();
}
