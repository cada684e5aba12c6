/* batch.c: helpers for the structures of batch.h. */
#include "batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char hex_digits[] = "0123456789abcdef";

void fp_build_id_hex(const struct fp_build_id *id, char *buf)
{
	/* A corrupted length must not make us write past the documented buffer. */
	size_t n = id->fb_len <= FP_BUILD_ID_MAX ? id->fb_len : FP_BUILD_ID_MAX;
	size_t i;

	for (i = 0; i < n; i++) {
		buf[2 * i] = hex_digits[id->fb_data[i] >> 4];
		buf[2 * i + 1] = hex_digits[id->fb_data[i] & 0xf];
	}
	buf[2 * n] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int fp_build_id_parse(const char *hex, struct fp_build_id *id)
{
	struct fp_build_id parsed;
	size_t len, i;

	if (!hex)
		return -EINVAL;
	/* strnlen: an unterminated or huge argument is rejected without
	 * reading more than one byte past the longest valid input. */
	len = strnlen(hex, 2 * FP_BUILD_ID_MAX + 1);
	/* "" is accepted: it is what fp_build_id_hex prints for an unknown id. */
	if (len % 2 != 0 || len > 2 * FP_BUILD_ID_MAX)
		return -EINVAL;
	memset(&parsed, 0, sizeof(parsed));
	for (i = 0; i < len / 2; i++) {
		int hi = hex_value(hex[2 * i]);
		int lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		parsed.fb_data[i] = (uint8_t)(hi << 4 | lo);
	}
	parsed.fb_len = (uint8_t)(len / 2);
	*id = parsed;
	return 0;
}

int fp_build_id_eq(const struct fp_build_id *a, const struct fp_build_id *b)
{
	size_t n = a->fb_len <= FP_BUILD_ID_MAX ? a->fb_len : FP_BUILD_ID_MAX;

	/* Bytes past fb_len are not part of the id and may hold anything. */
	if (a->fb_len != b->fb_len)
		return 0;
	return memcmp(a->fb_data, b->fb_data, n) == 0;
}

int fp_build_id_match(const struct fp_build_id *a, const struct fp_build_id *b)
{
	const struct fp_build_id *s = a->fb_len <= b->fb_len ? a : b, *l = s == a ? b : a;
	int i;

	if (!s->fb_len || memcmp(s->fb_data, l->fb_data, s->fb_len) != 0)
		return 0;
	for (i = s->fb_len; i < l->fb_len; i++)
		if (l->fb_data[i])
			return 0;
	return 1;
}

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
	if (!d->fh_host || !d->fh_boot_id || !d->fh_kernel_release || !d->fh_agent_version ||
	    !d->fh_label_keys || !d->fh_label_values)
		goto fail;
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
	for (size_t i = 0; i < r->fr_ntables; i++)
		free(r->fr_tables[i].tp_data);
	free(r->fr_tables);
	memset(r, 0, sizeof(*r));
}
