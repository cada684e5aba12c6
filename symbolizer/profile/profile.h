/* profile.h: one resolved profile (one device, one interval), the model the
 * writers (folded.h, pprof.h, svg.h) read.
 *
 * Mappings and frames are interned: adding the same one twice returns the
 * same index.  Samples with the same frames, pid, tid and names are merged
 * by adding their counts.  All strings are copied in.
 */
#ifndef FP_PROFILE_H
#define FP_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"

#define FP_INDEX_NONE UINT32_MAX

enum fp_frame_kind {
	FP_FRAME_USER = 0,
	FP_FRAME_KERNEL = 1,
	FP_FRAME_PYTHON = 2, /* a CPython frame: function, file and line only */
};

struct fp_pmapping {
	char *pm_path; /* file path, or "vmlinux" / module name */
	struct fp_build_id pm_build_id;
	uint8_t pm_kind; /* enum fp_mapping_kind */
};

/* A function whose code was inlined at a location. */
struct fp_pinline {
	char *pi_function;    /* demangled */
	char *pi_system_name; /* mangled; NULL if equal to pi_function */
	char *pi_file;        /* NULL if unknown */
	uint32_t pi_line;     /* 0 if unknown */
};

struct fp_pframe {
	uint32_t pf_mapping;    /* index into pr_mappings, or FP_INDEX_NONE */
	uint64_t pf_address;    /* file offset / kernel offset; raw address if no mapping */
	char *pf_function;      /* demangled name of the function the code belongs
				     * to (not inlined); NULL if unresolved */
	char *pf_system_name;   /* mangled name; NULL if equal to pf_function */
	uint8_t pf_kind;        /* enum fp_frame_kind */
	char *pf_file;          /* pf_function's source file, NULL if unknown */
	uint32_t pf_line;       /* its line here: the call site when code is inlined */
	uint32_t pf_start_line; /* FP_FRAME_PYTHON: the code's first line; else 0 */
	uint32_t pf_ninline;
	struct fp_pinline *pf_inline; /* functions inlined here, innermost first; each
				       * pi_line is the line inside that function */
};

struct fp_psample {
	uint32_t ps_nframes;
	uint32_t *ps_frames; /* indexes into pr_frames, leaf first */
	uint32_t ps_pid;
	uint32_t ps_tid;
	char ps_thread[FP_COMM_LEN];
	char ps_process[FP_COMM_LEN];
	char *ps_container; /* "" if none */
	uint64_t ps_count;  /* samples; off-CPU: nanoseconds away */
	uint64_t ps_blocks; /* off-CPU: the waits, estimated; else 0 */
};

struct fp_profile_index; /* private hash tables */

struct fp_profile {
	char *pr_host;
	uint64_t pr_start_ns; /* unix nanoseconds */
	uint64_t pr_duration_ns;
	uint64_t pr_period_ns; /* nanoseconds of CPU per sample */
	size_t pr_nmappings, pr_nframes, pr_nsamples;
	struct fp_pmapping *pr_mappings;
	struct fp_pframe *pr_frames;
	struct fp_psample *pr_samples;
	struct fp_profile_index *pr_index;
	int pr_is_offcpu;             /* off-CPU: ps_count is time away, ns; ps_blocks waits */
	struct fp_profile *pr_offcpu; /* owned; the same interval's off-CPU profile, or
					* NULL (none was asked for, or no block was) */
};

/* fp_profile_alloc: an empty profile for host.  0 or -ENOMEM. */
int fp_profile_alloc(struct fp_profile **p, const char *host, uint64_t start_ns,
		     uint64_t duration_ns, uint64_t period_ns);
void fp_profile_free(struct fp_profile *p);

/* fp_profile_bytes: the heap p holds, every block fp_profile_free would
 * free as malloc sized it (malloc_usable_size): what a queued profile
 * costs (pipeline.h bounds the queue by it).  Walks every frame and
 * sample: about as long as freeing p. */
size_t fp_profile_bytes(const struct fp_profile *p);

/* fp_profile_add_mapping: intern a mapping (key: kind, build-ID, path).
 * 0, -EINVAL (NULL path, build-ID too long) or -ENOMEM; *idx written on
 * success. */
int fp_profile_add_mapping(struct fp_profile *p, uint8_t kind, const struct fp_build_id *id,
			   const char *path, uint32_t *idx);

/* fp_profile_add_frame: intern a frame (key: mapping, address, kind).
 * function and system_name may be NULL; a frame first added unresolved
 * takes the name of a later add.  0, -EINVAL (mapping out of range) or
 * -ENOMEM. */
int fp_profile_add_frame(struct fp_profile *p, uint32_t mapping, uint64_t address, uint8_t kind,
			 const char *function, const char *system_name, uint32_t *idx);

/* fp_profile_add_python_frame: intern a CPython frame (key: qualname,
 * file, line; not its code object or offset, so that every instruction of
 * a line is one frame).  No mapping (pf_mapping FP_INDEX_NONE), address 0,
 * pf_function = qualname, pf_file = file, pf_line = line (0: unknown),
 * pf_start_line = first_line (that of the first add).  0, -EINVAL (NULL
 * qualname or file) or -ENOMEM. */
int fp_profile_add_python_frame(struct fp_profile *p, const char *qualname, const char *file,
				uint32_t line, uint32_t first_line, uint32_t *idx);

/* fp_profile_set_source: source lines and inlined functions of frame
 * (strings copied), unless it has them already.  0, -EINVAL or -ENOMEM. */
int fp_profile_set_source(struct fp_profile *p, uint32_t frame, const char *file, uint32_t line,
			  const struct fp_pinline *inl, uint32_t ninline);

/* fp_profile_add_sample: add count samples of a stack (leaf first).
 * 0, -EINVAL (frame index out of range) or -ENOMEM. */
int fp_profile_add_sample(struct fp_profile *p, const uint32_t *frames, uint32_t nframes,
			  uint32_t pid, uint32_t tid, const char *thread, const char *process,
			  const char *container, uint64_t count);

/* fp_profile_add_block: to an off-CPU profile (pr_is_offcpu), ns
 * nanoseconds off-CPU in blocks waits with this stack; merged as
 * fp_profile_add_sample's.  0, -EINVAL (not off-CPU, bad frame) or
 * -ENOMEM. */
int fp_profile_add_block(struct fp_profile *p, const uint32_t *frames, uint32_t nframes,
			 uint32_t pid, uint32_t tid, const char *thread, const char *process,
			 const char *container, uint64_t ns, uint64_t blocks);
/* fp_profile_frame_label: the frame's name as the folded and SVG outputs
 * show it: the function, or "module+0xOFFSET" when unresolved (module is
 * the mapping's file name, "[unknown]" without a mapping), with "_[k]"
 * appended for kernel frames and "_[py]" for Python frames.  Always NUL-terminates; returns the length
 * it wanted to write (like snprintf). */
int fp_profile_frame_label(const struct fp_profile *p, uint32_t frame, char *buf, size_t len);

/* fp_profile_frame_label_buf: the same label, whatever its length, in *buf:
 * a malloc'd buffer of *cap bytes that is grown as needed (like getline;
 * start from NULL and 0, reuse it across frames, free it when done).
 * Returns the label's length, or -EINVAL (bad frame) or -ENOMEM. */
int fp_profile_frame_label_buf(const struct fp_profile *p, uint32_t frame, char **buf, size_t *cap);

/* fp_profile_inline_label: the name of function k inlined at frame (0:
 * innermost), as folded and SVG outputs show it: the name with "_[i]".
 * Like fp_profile_frame_label otherwise. */
int fp_profile_inline_label(const struct fp_profile *p, uint32_t frame, uint32_t k, char *buf,
			    size_t len);

/* fp_profile_inline_label_buf: fp_profile_inline_label into *buf, grown
 * as needed (as fp_profile_frame_label_buf). */
int fp_profile_inline_label_buf(const struct fp_profile *p, uint32_t frame, uint32_t k, char **buf,
				size_t *cap);

/* fp_profile_total: the sum of all sample counts. */
uint64_t fp_profile_total(const struct fp_profile *p);

#endif
