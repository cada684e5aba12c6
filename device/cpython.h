/* cpython.h: the agent's half of CPython frames.
 *
 * The symbolizer finds a file's interpreter (its eval loop and _PyRuntime)
 * and sends that with the file's unwind table; for each process that maps
 * such a file this module gives the BPF walker the process's addresses and
 * the offsets of the interpreter's structures (device/pyoffsets.h), in the
 * py_procs map.  The walker then ships, per Python frame, the code
 * object's address, a tag and the instruction offset; this module reads
 * each code object once from the process's memory (process_vm_readv, every
 * size bounded): its qualified name, file name, first line and line table,
 * which the collector sends once per session as a mapping definition.
 *
 * Nothing here trusts the process: a code object whose tag no longer
 * matches (freed, its memory reused), a process that is gone and an
 * interpreter version without known offsets are refused and counted,
 * never named.
 *
 * Single-threaded: the agent's main loop owns it.
 */
#ifndef FP_CPYTHON_H
#define FP_CPYTHON_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "procmaps.h"
#include "sampler.h"
#include "unwind_maps.h"

struct fp_python;

struct fp_python_stats {
	uint64_t ps_procs;           /* processes given to the walker */
	uint64_t ps_unknown_version; /* processes whose interpreter has no known offsets */
	uint64_t ps_bad_offsets;     /* ... whose offsets did not fit the walker */
	uint64_t ps_code_reads;      /* code objects read */
	uint64_t ps_code_stale;      /* ... that were no longer the sampled one */
	uint64_t ps_code_errors;     /* ... that could not be read (process gone, bad data) */
	uint64_t ps_bytes_read;      /* bytes read from processes */
};

/* fp_python_alloc: the Python state for sampler s, whose unwind tables u
 * manages.  The sampler's Python walker is loaded
 * when the first CPython process is given to it (fp_python_set_proc).
 * 0, -ENOENT (the sampler has no unwind tables) or -ENOMEM. */
int fp_python_alloc(struct fp_python **py, struct fp_sampler *s, struct fp_unwind *u);
void fp_python_free(struct fp_python *py);

/* fp_python_set_proc: give the walker pid's interpreter, when one of pm's
 * mappings has a file whose installed unwind table names one (loading the
 * Python walker for the first); else take pid off the walker's list.  0,
 * or a negative errno: -ENOTSUP (an interpreter version without known
 * offsets: counted, logged once per process), or the sampler's error
 * loading the walker (fp_sampler_python). */
int fp_python_set_proc(struct fp_python *py, uint32_t pid, const struct fp_procmaps *pm);

/* fp_python_on_maps: the collector's maps hook (fp_collector_set_maps_fn)
 * for the walker: fp_unwind_set_proc, then fp_python_set_proc; arg py. */
void fp_python_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg);

/* fp_python_forget_proc: drop what is known of pid (it exited or exec'd). */
void fp_python_forget_proc(struct fp_python *py, uint32_t pid);

/* fp_python_read_code: the collector's code object hook
 * (fp_collector_set_pycode_fn), arg py: read the code object at addr in pid, which the
 * walker saw with tag (bpf/python.h).  On success *code and *filename are
 * malloc'd for the caller.  0; -ESTALE (the memory holds another object
 * now), -ESRCH (process gone, or not a Python process known here), -EFAULT
 * (unreadable), -EINVAL (not a well-formed code object) or -ENOMEM. */
int fp_python_read_code(uint32_t pid, uint64_t addr, uint32_t tag, struct fp_pycode **code,
			char **filename, void *py);

/* fp_python_str_layout: from hdr, the first po_str_compact_size bytes of
 * a str object (untrusted), where its characters are (bytes from the
 * object's start), their width (1, 2 or 4 bytes) and how many of them to
 * take (at most max).  0, or -EINVAL when it is not a compact str (code
 * objects' names and file names always are). */
struct fp_py_offsets;
int fp_python_str_layout(const struct fp_py_offsets *o, const uint8_t *hdr, size_t max,
			 size_t *data_off, unsigned *kind, size_t *count);

/* fp_python_str_utf8: count characters of width kind at raw as UTF-8 in
 * out (room for max + 1 bytes), cut at max bytes on a character boundary
 * and NUL-terminated; lone surrogates and values past U+10FFFF become
 * U+FFFD.  Returns the bytes written. */
size_t fp_python_str_utf8(const uint8_t *raw, size_t count, unsigned kind, char *out, size_t max);

void fp_python_stats(const struct fp_python *py, struct fp_python_stats *st);

/* fp_python_log: log the statistics and the walker's Python counters c
 * (fp_sampler_counters). */
void fp_python_log(const struct fp_python *py, const uint64_t c[FP_CNT_MAX]);

/* fp_python_bytes: the module's own memory. */
size_t fp_python_bytes(const struct fp_python *py);

#endif
