/* batch.c: helpers for the structures of batch.h. */
#include "batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

int fp_hello_copy(struct fp_hello *d, const struct fp_hello *h)
{
	size_t i;

	*d = *h;
	d->fh_host = dup_or_empty(h->fh_host);
	d->fh_boot_id = dup_or_empty(h->fh_boot_id);
	d->fh_kernel_release = dup_or_empty(h->fh_kernel_release);
	d->fh_agent_version = dup_or_empty(h->fh_agent_version);
	d->fh_label_keys = calloc(h->fh_nlabels + 1, sizeof(char *));
	d->fh_label_values = calloc(h->fh_nlabels + 1, sizeof(char *));
	d->fh_held = calloc(h->fh_nheld + 1, sizeof(*d->fh_held));
	if (!d->fh_host || !d->fh_boot_id || !d->fh_kernel_release || !d->fh_agent_version ||
	    !d->fh_label_keys || !d->fh_label_values || !d->fh_held)
		goto fail;
	if (h->fh_nheld)
		memcpy(d->fh_held, h->fh_held, h->fh_nheld * sizeof(*d->fh_held));
	for (i = 0; i < h->fh_nlabels; i++) {
		d->fh_label_keys[i] = dup_or_empty(h->fh_label_keys[i]);
		d->fh_label_values[i] = dup_or_empty(h->fh_label_values[i]);
		if (!d->fh_label_keys[i] || !d->fh_label_values[i])
			goto fail;
	}
	return 0;
fail:
	fp_hello_fini(d);
	return -ENOMEM;
}

void fp_hello_fini(struct fp_hello *h)
{
	size_t i;

	free(h->fh_host);
	free(h->fh_boot_id);
	free(h->fh_kernel_release);
	free(h->fh_agent_version);
	for (i = 0; i < h->fh_nlabels; i++) {
		if (h->fh_label_keys)
			free(h->fh_label_keys[i]);
		if (h->fh_label_values)
			free(h->fh_label_values[i]);
	}
	free(h->fh_label_keys);
	free(h->fh_label_values);
	free(h->fh_held);
	memset(h, 0, sizeof(*h));
}

void fp_pycode_free(struct fp_pycode *c)
{
	if (!c)
		return;
	free(c->pc_qualname);
	free(c->pc_linetable);
	free(c);
}

void fp_batch_fini(struct fp_batch *b)
{
	size_t i;

	if (b->fb_mappings)
		for (i = 0; i < b->fb_nmappings; i++) {
			free(b->fb_mappings[i].fm_path);
			fp_pycode_free(b->fb_mappings[i].fm_py);
		}
	if (b->fb_threads)
		for (i = 0; i < b->fb_nthreads; i++)
			free(b->fb_threads[i].ft_container);
	free(b->fb_mappings);
	free(b->fb_threads);
	free(b->fb_nodes);
	free(b->fb_counts);
	memset(b, 0, sizeof(*b));
}

void fp_ksyms_fini(struct fp_ksyms *k)
{
	size_t i;

	if (k->fs_syms)
		for (i = 0; i < k->fs_nsyms; i++)
			free(k->fs_syms[i].fk_name);
	free(k->fs_syms);
	free(k->fs_name);
	memset(k, 0, sizeof(*k));
}

void fp_file_data_fini(struct fp_file_data *d)
{
	free(d->fd_data);
	memset(d, 0, sizeof(*d));
}

void fp_reply_fini(struct fp_reply *r)
{
	free(r->fr_error);
	free(r->fr_want);
	free(r->fr_ranges);
	for (size_t i = 0; i < r->fr_ntables; i++) {
		if (r->fr_tables[i].tp_release)
			r->fr_tables[i].tp_release(r->fr_tables[i].tp_release_arg);
		else
			free(r->fr_tables[i].tp_data);
	}
	free(r->fr_tables);
	fp_kfuncs_fini(&r->fr_kfuncs);
	memset(r, 0, sizeof(*r));
}

void fp_kfuncs_fini(struct fp_kfuncs *k)
{
	free(k->kf_offsets);
	free(k->kf_gaps);
	memset(k, 0, sizeof(*k));
}
