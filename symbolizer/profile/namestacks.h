/* namestacks.h: a profile read back from a file, as stacks of function
 * names with a value each: what `fleetprof report` prints from (top.h).
 *
 * Two formats are read, told apart by their bytes:
 * - pprof (perftools.profiles.Profile, proto/pprof.proto), gzip'd or not,
 *   from any tool: a sample's stack is its locations' lines, innermost
 *   first (a location's inlined functions come before the function they
 *   were inlined into); its value is that of one sample type (the
 *   profile's default_sample_type, else the last, as `go tool pprof`
 *   chooses), and its process the sample's "process_name" label
 *   (fleetprof's), else its "process" or "comm" label, when it has one.  Functions of the same name in two
 *   source files stay two functions, as in `go tool pprof`.
 * - folded stacks, "PROCESS;ROOT;...;LEAF COUNT" per line, as fleetprof,
 *   flamegraph.pl's stackcollapse scripts and perf script write them: the
 *   first name of a line is its process.  fleetprof's "_[i]" mark of an
 *   inlined function is dropped: inlined or not, it is one function, as
 *   pprof counts it ("_[k]", a kernel function, stays).
 *
 * Files are untrusted: every index, count and length is checked, and a
 * file with anything wrong is refused whole, saying what and where.
 */
#ifndef FP_NAMESTACKS_H
#define FP_NAMESTACKS_H

#include <stddef.h>
#include <stdint.h>

#define FP_NAME_NONE UINT32_MAX
/* The largest file, and the most its gzip may inflate to. */
#define FP_NAMESTACKS_MAX_BYTES (1u << 30)

struct fp_namestack {
	uint32_t ns_first;   /* its leaf's index in nk_frames; the root is last */
	uint32_t ns_depth;   /* its frames */
	uint32_t ns_process; /* name id of its process, or FP_NAME_NONE */
	int64_t ns_value;
};

struct fp_intern;

struct fp_namestacks {
	struct fp_intern *nk_names; /* name ids: functions and processes */
	uint32_t *nk_frames;        /* name ids, the stacks one after the other */
	size_t nk_nframes, nk_frames_cap;
	struct fp_namestack *nk_stacks;
	size_t nk_nstacks, nk_stacks_cap;
	char nk_type[64];      /* what the values count: "samples", "cpu", ... */
	char nk_unit[64];      /* and in what: "count", "nanoseconds", ... */
	const char *nk_format; /* "pprof" or "folded" */
};

/* fp_namestacks_alloc: an empty set.  0 or -ENOMEM. */
int fp_namestacks_alloc(struct fp_namestacks **nk);
void fp_namestacks_free(struct fp_namestacks *nk);

/* fp_namestacks_read: the stacks of the profile file held in data (len
 * bytes), pprof or folded (see the top of this file), added to nk, which
 * must be empty.  sample_type picks a pprof sample type by name (NULL: the
 * default).  On error, why (and where) is written to err (errlen bytes)
 * and nk is left empty.  0, -EINVAL (not a profile, or malformed),
 * -ENOENT (no sample type of that name), -EFBIG (over
 * FP_NAMESTACKS_MAX_BYTES) or -ENOMEM. */
int fp_namestacks_read(struct fp_namestacks *nk, const void *data, size_t len,
		       const char *sample_type, char *err, size_t errlen);

/* fp_namestacks_name: the printable name of name id (a function's name
 * without its source file), or "" for an id out of range. */
const char *fp_namestacks_name(const struct fp_namestacks *nk, uint32_t id);

/* fp_namestacks_find: the id of the process called name, or
 * FP_NAME_NONE when no stack has it. */
uint32_t fp_namestacks_find_process(const struct fp_namestacks *nk, const char *name);

#endif
