/* folded.c: the profile as folded stacks, one "a;b;c COUNT" line per stack.
 *
 * Lines are built in one growing buffer, sorted, and equal neighbours merged:
 * samples that differ only in what the format cannot show (pid, tid,
 * container, and the thread without by_thread) become one line, and the
 * output is byte-for-byte reproducible.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "vec.h"

struct buffer {
	char *b_data;
	size_t b_len, b_cap;
};

static int buffer_reserve(struct buffer *b, size_t more)
{
	if (more > SIZE_MAX - b->b_len)
		return -ENOMEM;
	return fp_vec_reserve(&b->b_data, &b->b_cap, b->b_len + more, 1);
}

/* append_name: s with the characters that would split a frame (';') or a
 * line (control characters) replaced; "[unknown]" for an empty name so
 * that no frame is blank. */
static int append_name(struct buffer *b, const char *s, size_t len)
{
	if (!len) {
		s = "[unknown]";
		len = strlen(s);
	}
	if (buffer_reserve(b, len))
		return -ENOMEM;
	char *d = b->b_data + b->b_len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		d[i] = c == ';' ? ':' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	b->b_len += len;
	return 0;
}

static int append_char(struct buffer *b, char c)
{
	if (buffer_reserve(b, 1))
		return -ENOMEM;
	b->b_data[b->b_len++] = c;
	return 0;
}

struct line {
	const char *l_text; /* NUL-terminated, inside the lines buffer */
	uint64_t l_count;
};

static int line_cmp(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->l_text, ((const struct line *)b)->l_text);
}

/* frame_labels: every frame's sanitised label, NUL-terminated, in one
 * buffer; offsets[i] locates frame i.  Labels are made once per frame, not
 * once per appearance in a stack. */
static int frame_labels(const struct fp_profile *p, struct buffer *b, size_t *offsets)
{
	char *label = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; !err && i < p->pr_nframes; i++) {
		int n = fp_profile_frame_label_buf(p, (uint32_t)i, &label, &cap);

		offsets[i] = b->b_len;
		err = n < 0 ? n : append_name(b, label, (size_t)n);
		/* Functions inlined here follow, outermost first: root to leaf. */
		for (uint32_t k = p->pr_frames[i].pf_ninline; !err && k-- > 0;) {
			n = fp_profile_inline_label_buf(p, (uint32_t)i, k, &label, &cap);
			err = n < 0 ? n : append_char(b, ';');
			if (!err)
				err = append_name(b, label, (size_t)n);
		}
		if (!err)
			err = append_char(b, '\0');
	}
	free(label);
	return err;
}

int fp_folded_encode(const struct fp_profile *p, int by_thread, char **buf, size_t *len)
{
	struct buffer labels = { 0 }, text = { 0 }, out = { 0 };
	size_t *label_offsets = NULL, *line_offsets = NULL;
	struct line *lines = NULL;
	size_t n = p->pr_nsamples;
	int err;

	label_offsets = calloc(p->pr_nframes ? p->pr_nframes : 1, sizeof(*label_offsets));
	line_offsets = calloc(n ? n : 1, sizeof(*line_offsets));
	lines = calloc(n ? n : 1, sizeof(*lines));
	if (!label_offsets || !line_offsets || !lines) {
		err = -ENOMEM;
		goto out;
	}
	err = frame_labels(p, &labels, label_offsets);
	if (err)
		goto out;

	for (size_t i = 0; i < n; i++) {
		const struct fp_psample *s = &p->pr_samples[i];

		line_offsets[i] = text.b_len;
		err = append_name(&text, s->ps_process, strnlen(s->ps_process, FP_COMM_LEN));
		if (!err && by_thread) {
			err = append_char(&text, ';');
			if (!err)
				err = append_name(&text, s->ps_thread,
						  strnlen(s->ps_thread, FP_COMM_LEN));
		}
		/* Frames are stored leaf first; folded stacks start at the root. */
		for (uint32_t j = s->ps_nframes; !err && j-- > 0;) {
			const char *label = labels.b_data + label_offsets[s->ps_frames[j]];
			size_t label_len = strlen(label);

			err = buffer_reserve(&text, label_len + 1);
			if (!err) {
				text.b_data[text.b_len++] = ';';
				memcpy(text.b_data + text.b_len, label, label_len);
				text.b_len += label_len;
			}
		}
		if (!err)
			err = append_char(&text, '\0');
		if (err)
			goto out;
	}
	/* The buffer no longer moves: offsets can become pointers. */
	for (size_t i = 0; i < n; i++) {
		lines[i].l_text = text.b_data + line_offsets[i];
		lines[i].l_count = p->pr_samples[i].ps_count;
	}
	qsort(lines, n, sizeof(*lines), line_cmp);

	for (size_t i = 0; i < n;) {
		uint64_t count = lines[i].l_count;
		size_t j = i + 1, tlen = strlen(lines[i].l_text);

		while (j < n && !strcmp(lines[j].l_text, lines[i].l_text))
			count += lines[j++].l_count;
		/* " COUNT\n": 20 digits at most, and the final NUL. */
		if ((err = buffer_reserve(&out, tlen + 23)))
			goto out;
		memcpy(out.b_data + out.b_len, lines[i].l_text, tlen);
		out.b_len += tlen;
		out.b_len += (size_t)snprintf(out.b_data + out.b_len, 23, " %" PRIu64 "\n", count);
		i = j;
	}
	if ((err = buffer_reserve(&out, 1)))
		goto out;
	out.b_data[out.b_len] = '\0';
	*buf = out.b_data;
	*len = out.b_len;
	out.b_data = NULL;
out:
	free(out.b_data);
	free(labels.b_data);
	free(text.b_data);
	free(label_offsets);
	free(line_offsets);
	free(lines);
	return err;
}
