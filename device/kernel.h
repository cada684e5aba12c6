/* kernel.h: what the agent knows of the running kernel: where its text
 * starts (kernel frames travel as offsets from _text, which hides KASLR),
 * its build-ID and its modules; and the kallsyms snapshot it uploads when
 * the symbolizer asks for it. */
#ifndef FP_KERNEL_H
#define FP_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"

struct fp_kmodule {
	char km_name[64];
	uint64_t km_base, km_size;
	struct fp_build_id km_build_id;
};

struct fp_kernel {
	uint64_t kn_text; /* address of _text; 0 if unreadable */
	struct fp_build_id kn_build_id;
	char kn_release[65];
	char kn_boot_id[40];
	size_t kn_nmodules;
	struct fp_kmodule *kn_modules; /* sorted by base */
};

/* fp_kernel_read: fill k from procfs and sysfs (root paths "/proc" and
 * "/sys").  Missing pieces are left empty rather than failing.  0 or
 * -ENOMEM. */
int fp_kernel_read(const char *proc, const char *sys, struct fp_kernel *k);
void fp_kernel_fini(struct fp_kernel *k);

/* fp_kernel_module: the module containing addr, or NULL. */
const struct fp_kmodule *fp_kernel_module(const struct fp_kernel *k, uint64_t addr);

typedef int (*fp_ksyms_emit_fn)(const struct fp_ksyms *part, void *arg);

/* fp_kernel_ksyms: read the text symbols of target (the kernel's or a
 * module's build-ID) from kallsyms and pass them to emit in parts of at
 * most max_syms, the last one flagged.  0, -ENOENT (unknown target),
 * -EINVAL (max_syms 0), a negative errno, or emit's non-zero return. */
int fp_kernel_ksyms(const struct fp_kernel *k, const char *proc, const struct fp_build_id *target,
		    uint64_t session, size_t max_syms, fp_ksyms_emit_fn emit, void *arg);

#endif
