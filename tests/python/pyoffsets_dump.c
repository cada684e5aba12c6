/* pyoffsets_dump.c: prints what device/pyoffsets.c says, in the format of
 * tests/python/dwarf_offsets.sh ("po_NAME VALUE" lines), for
 * tests/e2e/pyoffsets_test.sh.  Built by the test itself:
 *
 *   cc -Icommon -Idevice -Ibpf tests/python/pyoffsets_dump.c device/pyoffsets.c
 *
 *   pyoffsets_dump table MINOR     the table entry for 3.MINOR
 *   pyoffsets_dump file PATH       _Py_DebugOffsets bytes from a file
 *   pyoffsets_dump mem PID ADDR    _Py_DebugOffsets read from the memory of
 *                                  process PID at ADDR (hex), /proc/PID/mem
 *
 * Exit 0 and the lines, or exit 1 with the error on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyoffsets.h"

static void print(const struct fp_py_offsets *o)
{
#define P(f) printf(#f " %u\n", (unsigned)o->f)
	P(po_rt_interp_head);
	P(po_is_threads_head);
	P(po_ts_next);
	P(po_ts_tid);
	P(po_ts_frame);
	P(po_cf_frame);
	P(po_fr_previous);
	P(po_fr_code);
	P(po_fr_instr);
	P(po_fr_entry);
	P(po_co_firstlineno);
	P(po_co_filename);
	P(po_co_name);
	P(po_co_linetable);
	P(po_co_code);
	P(po_bytes_size);
	P(po_bytes_data);
	P(po_str_state);
	P(po_str_length);
	P(po_str_ascii_size);
	P(po_str_compact_size);
	printf("version 0x%04x\nmodel %u\ntid_kind %u\ninstr_kind %u\nlines %u\n",
	       (unsigned)o->po_version, (unsigned)o->po_model, (unsigned)o->po_tid_kind,
	       (unsigned)o->po_instr_kind, (unsigned)o->po_lines);
#undef P
}

static int parse(const unsigned char *buf, size_t len)
{
	struct fp_py_offsets o;
	int err = fp_py_offsets_debug(buf, len, &o);

	if (err) {
		fprintf(stderr, "pyoffsets_dump: fp_py_offsets_debug: %s\n", strerror(-err));
		return 1;
	}
	print(&o);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned char buf[FP_PY_DEBUG_OFFSETS_MAX];
	ssize_t n;
	int fd;

	if (argc == 3 && strcmp(argv[1], "table") == 0) {
		const struct fp_py_offsets *o = fp_py_offsets_for(0x0300 | (unsigned)atoi(argv[2]));

		if (!o) {
			fprintf(stderr, "pyoffsets_dump: no table entry for 3.%s\n", argv[2]);
			return 1;
		}
		print(o);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "file") == 0) {
		fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(argv[2]);
			return 1;
		}
		n = read(fd, buf, sizeof(buf));
		close(fd);
		return n < 0 ? 1 : parse(buf, (size_t)n);
	}
	if (argc == 4 && strcmp(argv[1], "mem") == 0) {
		char path[64];
		uint64_t addr = strtoull(argv[3], NULL, 16);

		snprintf(path, sizeof(path), "/proc/%d/mem", atoi(argv[2]));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(path);
			return 1;
		}
		n = pread(fd, buf, sizeof(buf), (off_t)addr);
		close(fd);
		if (n < 0) {
			perror(path);
			return 1;
		}
		return parse(buf, (size_t)n);
	}
	fprintf(stderr, "usage: pyoffsets_dump table MINOR | file PATH | mem PID HEXADDR\n");
	return 2;
}
