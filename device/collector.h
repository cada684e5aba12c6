/* collector.h: from raw BPF samples to what the wire carries.
 *
 * Each user frame becomes (mapping, file offset), each kernel frame
 * (vmlinux or module, offset); mappings, threads and the nodes of a stack
 * trie are interned, so that an interval is just (thread, leaf node, count)
 * triples and each definition crosses the wire once per session.  The collector remembers
 * which definitions the peer has; batches carry only the others.
 */
#ifndef FP_COLLECTOR_H
#define FP_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "batch.h"
#include "kernel.h"
#include "procmaps.h"
#include "stacks.h"

struct fp_collector;

/* One closed interval, as the agent buffers it until acknowledged. */
struct fp_interval {
	uint64_t fi_seq;
	uint64_t fi_start_ns, fi_end_ns;
	size_t fi_ncounts;
	struct fp_count *fi_counts; /* owned */
	uint64_t fi_samples;        /* sum of the CPU counts */
	uint64_t fi_offcpu_ns;      /* sum of the off-CPU counts' time */
	struct fp_lost fi_lost;
	uint8_t fi_acked; /* acknowledged once (counted then) */
};

/* fp_collector_alloc: proc is the procfs mount ("/proc"), docker_root where
 * docker keeps container state; k must outlive the collector.  0 or
 * -ENOMEM. */
int fp_collector_alloc(struct fp_collector **c, const char *proc, const char *docker_root,
		       const struct fp_kernel *k);
void fp_collector_free(struct fp_collector *c);

/* A process's mappings were read (known 1) or found wanting (known 0), or
 * every cached process was forgotten (pid 0, known 0): the sampler's
 * known_pids follows this. */
typedef void (*fp_known_fn)(uint32_t pid, int known, void *arg);

/* fp_collector_set_known_fn: install that hook (default: none). */
void fp_collector_set_known_fn(struct fp_collector *c, fp_known_fn fn, void *arg);

/* A process's mappings were (re)read, with the build-ID of every file
 * mapping read: device/unwind.c lists those that have unwind tables. */
typedef void (*fp_maps_fn)(uint32_t pid, const struct fp_procmaps *pm, void *arg);

/* fp_collector_set_maps_fn: install that hook (default: none; without it
 * build-IDs are read only for the mappings samples fall in). */
void fp_collector_set_maps_fn(struct fp_collector *c, fp_maps_fn fn, void *arg);

/* A Python code object the walker saw (bpf/python.h): read it from
 * process pid.  On success *code and *filename are malloc'd and become the
 * collector's.  A negative errno otherwise (device/cpython.h). */
typedef int (*fp_pycode_fn)(uint32_t pid, uint64_t addr, uint32_t tag, struct fp_pycode **code,
			    char **filename, void *arg);

/* fp_collector_set_pycode_fn: install that hook (default: none, and every
 * Python frame is "[unknown]").  Each distinct code object (pid, address,
 * tag) is read once per collector; one that cannot be read is defined as
 * "[unknown]", never under another code object's name.  A Python frame's
 * offset is sent as the first of the instructions, in a row, on the same
 * line as its own (common/pyline.h), decoded once per code object. */
void fp_collector_set_pycode_fn(struct fp_collector *c, fp_pycode_fn fn, void *arg);

/* Where the code around file offset of the file id starts, in *start, for
 * folding the addresses of native frames below Python into fewer trie
 * nodes: 0, or a negative errno to keep offset as it is
 * (device/unwind_maps.h, fp_unwind_row_start). */
typedef int (*fp_fold_fn)(const struct fp_build_id *id, uint64_t offset, uint64_t *start,
			  void *arg);

/* fp_collector_set_fold_fn: install that hook (default: none, every frame
 * at its exact address).  It is asked about the native frames of a stack
 * below its innermost Python frame (the C function Python called and what
 * that called), in files with a build-ID.  The leaf's address varies with
 * every sample and made most of a Python process's new trie nodes;
 * folded, a frame keeps its function but not its line. */
void fp_collector_set_fold_fn(struct fp_collector *c, fp_fold_fn fn, void *arg);

/* A walk stopped short of its root in the file id (the file of its last
 * native frame): its table is missing, maybe only not installed yet. */
typedef void (*fp_cut_fn)(const struct fp_build_id *id, void *arg);

/* fp_collector_set_cut_fn: install that hook (default: none). */
void fp_collector_set_cut_fn(struct fp_collector *c, fp_cut_fn fn, void *arg);

/* fp_collector_set_kfuncs: fold each vmlinux frame to the start of its
 * function (common/kfuncs.h) with k, the kernel's function starts the
 * symbolizer sent, whose build-ID the caller checked against the running
 * kernel's; NULL: frames at their exact offset (the default).  k stays
 * the caller's and must outlive its use.  Module frames are not folded. */
struct fp_kfuncs;
void fp_collector_set_kfuncs(struct fp_collector *c, const struct fp_kfuncs *k);

/* fp_collector_remap: call the maps hook again for every process whose
 * mappings are held (new unwind tables arrived). */
void fp_collector_remap(struct fp_collector *c);

/* A file that samples showed: its build-ID, its path as process pid sees
 * it.  Non-zero stops the walk and is returned. */
typedef int (*fp_file_fn)(const struct fp_build_id *id, const char *path, uint32_t pid, void *arg);

/* fp_collector_new_files: fn for each file seen since the last call (each
 * once per collector; `fleetprof record` fetches their unwind tables).
 * 0, or what fn returned. */
int fp_collector_new_files(struct fp_collector *c, fp_file_fn fn, void *arg);

/* fp_collector_adopt: read pid's mappings now, as its first sample would,
 * so that the hooks see them before any sample (`fleetprof record -p`
 * installs the process's unwind tables before it is sampled).  0, -ESRCH
 * (no such process) or -ENOMEM. */
int fp_collector_adopt(struct fp_collector *c, uint32_t pid);

/* fp_collector_add: account one sample (the sampler's callback). */
void fp_collector_add(struct fp_collector *c, const struct fp_bpf_sample *s, const void *ustack,
		      const void *kstack);

/* fp_collector_cut: close the interval that started at the previous cut
 * (or at allocation: the first interval starts then) and give it sequence
 * number seq.  0 or -ENOMEM. */
int fp_collector_cut(struct fp_collector *c, uint64_t seq, uint64_t end_ns, struct fp_interval *iv);
void fp_interval_fini(struct fp_interval *iv);

/* fp_collector_batch: the batch for iv: its counts plus the definitions the
 * peer does not have yet.  The batch borrows strings and frames from the
 * collector: use it before the next add, and release it with
 * fp_collector_batch_release.  0 or -ENOMEM. */
int fp_collector_batch(struct fp_collector *c, const struct fp_interval *iv, uint64_t session,
		       uint64_t period_ns, struct fp_batch *b);
void fp_collector_batch_release(struct fp_collector *c, struct fp_batch *b);

/* fp_collector_sent: the peer acknowledged b; its definitions are known. */
void fp_collector_sent(struct fp_collector *c, const struct fp_batch *b);

/* fp_collector_forget: the peer lost every definition (new session). */
void fp_collector_forget(struct fp_collector *c);

/* fp_collector_open_file: the file with build-ID id, mapped by the latest
 * process that reported it, opened through its mapping
 * (fp_procmaps_open: no path inside a container is followed, and nothing
 * on this host is opened in its stead); its build-ID is checked.  An fd,
 * or -ENOENT (that process has exited or unmapped it). */
int fp_collector_open_file(struct fp_collector *c, const struct fp_build_id *id);

/* fp_collector_bytes: memory the collector holds, for the agent's budget. */
size_t fp_collector_bytes(const struct fp_collector *c);

/* The stack trie's nodes (since the collector's start), by their frame:
 * which kinds of frame make new stacks, for the agent's exit log. */
struct fp_collector_nodes {
	uint64_t cn_user;     /* native, in a process's ELF file */
	uint64_t cn_kernel;   /* vmlinux and modules */
	uint64_t cn_python;   /* Python code objects */
	uint64_t cn_unmapped; /* addresses in no mapping */
	uint64_t cn_folded;   /* frames the fold hook moved, ever */
	uint64_t cn_kfolded;  /* kernel frames moved to their function's start, ever */
};

/* fp_collector_nodes: count them, in time linear in their number. */
void fp_collector_nodes(const struct fp_collector *c, struct fp_collector_nodes *n);

#endif
