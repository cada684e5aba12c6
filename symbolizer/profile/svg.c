/* svg.c: the profile as a self-contained, interactive flame graph.
 *
 * Samples are merged into a tree keyed by what is displayed (process,
 * thread, frame label), so frames at different addresses of one function
 * share a box.  Children are ordered by name, which makes the picture
 * reproducible.  Each box is a <g> carrying its position in samples
 * (data-s: first sample, data-n: samples, data-d: depth); the embedded
 * script only rescales those, so zooming needs no data besides the DOM.
 * Names come from untrusted processes: they are made valid UTF-8 without
 * control characters before XML escaping, or the document would not parse.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexset.h"
#include "intern.h"
#include "output.h"
#include "vec.h"

#define SVG_WIDTH 1200
#define SVG_PAD 10 /* left and right margin */
#define FRAME_HEIGHT 16
#define FONT_SIZE 12
#define CHAR_WIDTH 7.2 /* advance of a 12px monospace glyph */
#define SVG_TOP 50     /* title and controls */
#define SVG_BOTTOM 32  /* details line */
#define MIN_SHARE 1000 /* boxes under 1/MIN_SHARE of the total are left out */
#define NONE UINT32_MAX

enum node_kind {
	NODE_ROOT,
	NODE_PROCESS,
	NODE_THREAD,
	NODE_USER,
	NODE_USER_UNRESOLVED,
	NODE_KERNEL,
	NODE_KERNEL_UNRESOLVED,
	NODE_PYTHON,
};

struct node {
	uint32_t n_parent, n_name;
	uint32_t n_first, n_next; /* first child, next sibling; NONE if absent */
	uint64_t n_count;
	uint64_t n_start; /* samples left of this box */
	uint32_t n_depth;
	uint8_t n_kind;
};

struct graph {
	/* names: sanitised, NUL-terminated (the NUL is part of the key) */
	struct fp_intern *g_names;
	const char **g_name_ptrs; /* by id, once every name is interned */
	char *g_scratch;          /* where a name is sanitised */
	size_t g_scratch_cap;
	/* the tree; node 0 is the root */
	struct node *g_nodes;
	size_t g_nnodes, g_nodes_cap;
	struct fp_indexset g_child_set;
	uint64_t g_total;
	int g_offcpu; /* counts are nanoseconds off-CPU */
};

static const char *name_of(const struct graph *g, uint32_t name)
{
	return g->g_name_ptrs[name];
}

/* name_table: fill g_name_ptrs; nothing may be interned afterwards. */
static int name_table(struct graph *g)
{
	size_t n = fp_intern_count(g->g_names), len;

	g->g_name_ptrs = calloc(n ? n : 1, sizeof(*g->g_name_ptrs));
	if (!g->g_name_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		g->g_name_ptrs[i] = fp_intern_key(g->g_names, (uint32_t)i, &len);
	return 0;
}

/* utf8_len: the length of the valid UTF-8 sequence at s (at most len bytes
 * available), 0 if invalid (overlong, surrogate, beyond U+10FFFF, or one of
 * the non-characters U+FFFE and U+FFFF that XML forbids). */
static size_t utf8_len(const unsigned char *s, size_t len)
{
	uint32_t cp;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
		return 0;
	return n;
}

/* intern_name: the id of s after sanitising (invalid bytes and control
 * characters become '?', an empty name "[unknown]").  0 or -ENOMEM. */
static int intern_name(struct graph *g, const char *s, size_t len, uint32_t *id)
{
	if (!len) {
		s = "[unknown]";
		len = strlen(s);
	}
	if (fp_vec_reserve(&g->g_scratch, &g->g_scratch_cap, len + 1, 1))
		return -ENOMEM;
	char *dst = g->g_scratch;
	const unsigned char *src = (const unsigned char *)s;
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(src + i, len - i);

		if (n == 1 && (src[i] < 0x20 || src[i] == 0x7f))
			n = 0;
		if (!n) {
			dst[o++] = '?';
			i++;
			continue;
		}
		memcpy(dst + o, src + i, n);
		o += n;
		i += n;
	}
	dst[o] = '\0';
	/* Most names were seen before: finding them first hashes them once
	 * (fp_intern_get alone hashes twice). */
	if (!fp_intern_find(g->g_names, dst, o + 1, id))
		return 0;
	return fp_intern_get(g->g_names, dst, o + 1, id, NULL);
}

static int add_node(struct graph *g, uint32_t parent, uint32_t name, uint8_t kind, uint32_t *id)
{
	if (g->g_nnodes >= NONE - 1)
		return -ENOMEM;
	if (fp_vec_reserve(&g->g_nodes, &g->g_nodes_cap, g->g_nnodes + 1, sizeof(*g->g_nodes)))
		return -ENOMEM;
	struct node *n = &g->g_nodes[g->g_nnodes];
	memset(n, 0, sizeof(*n));
	n->n_parent = parent;
	n->n_name = name;
	n->n_first = NONE;
	n->n_next = NONE;
	n->n_kind = kind;
	*id = (uint32_t)g->g_nnodes++;
	return 0;
}

struct child_key {
	uint32_t parent, name;
};

static int child_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct node *n = &((const struct graph *)ctx)->g_nodes[index];
	const struct child_key *k = key;

	return n->n_parent == k->parent && n->n_name == k->name;
}

/* child: the child of parent named name, created (with kind) if missing. */
static int child(struct graph *g, uint32_t parent, uint32_t name, uint8_t kind, uint32_t *id)
{
	struct fp_indexset *set = &g->g_child_set;
	struct child_key key = { parent, name };
	uint32_t hash = fp_hash_finish(((uint64_t)parent << 32 | name) * 0x9e3779b97f4a7c15ULL);
	size_t slot;
	uint32_t found = fp_indexset_find(set, hash, child_eq, g, &key, &slot);
	int err;

	if (found != FP_INDEXSET_NONE) {
		*id = found;
		return 0;
	}
	err = fp_indexset_make_room(set, hash, &slot);
	if (!err)
		err = add_node(g, parent, name, kind, id);
	if (!err)
		fp_indexset_insert(set, slot, hash, *id);
	return err;
}

static int frame_kind(const struct fp_pframe *f)
{
	if (f->pf_kind == FP_FRAME_KERNEL)
		return f->pf_function ? NODE_KERNEL : NODE_KERNEL_UNRESOLVED;
	if (f->pf_kind == FP_FRAME_PYTHON)
		return NODE_PYTHON;
	return f->pf_function ? NODE_USER : NODE_USER_UNRESOLVED;
}

/* frame_names: the name id of every frame, labelled once per frame. */
static int frame_names(const struct fp_profile *p, struct graph *g, uint32_t *names)
{
	char *label = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; !err && i < p->pr_nframes; i++) {
		int n = fp_profile_frame_label_buf(p, (uint32_t)i, &label, &cap);

		err = n < 0 ? n : intern_name(g, label, (size_t)n, &names[i]);
	}
	free(label);
	return err;
}

static int build(const struct fp_profile *p, struct graph *g, int by_thread)
{
	uint32_t *names = NULL, root_name, id;
	char *label = NULL;
	size_t cap = 0;
	int err;

	if ((err = fp_intern_alloc(&g->g_names)) || (err = intern_name(g, "all", 3, &root_name)) ||
	    (err = add_node(g, NONE, root_name, NODE_ROOT, &id)))
		return err;
	names = calloc(p->pr_nframes ? p->pr_nframes : 1, sizeof(*names));
	if (!names)
		return -ENOMEM;
	err = frame_names(p, g, names);

	for (size_t i = 0; !err && i < p->pr_nsamples; i++) {
		const struct fp_psample *s = &p->pr_samples[i];
		uint32_t cur = 0, name;

		g->g_nodes[0].n_count += s->ps_count;
		err = intern_name(g, s->ps_process, strnlen(s->ps_process, FP_COMM_LEN), &name);
		if (!err)
			err = child(g, cur, name, NODE_PROCESS, &cur);
		if (!err)
			g->g_nodes[cur].n_count += s->ps_count;
		if (!err && by_thread) {
			err = intern_name(g, s->ps_thread, strnlen(s->ps_thread, FP_COMM_LEN),
					  &name);
			if (!err)
				err = child(g, cur, name, NODE_THREAD, &cur);
			if (!err)
				g->g_nodes[cur].n_count += s->ps_count;
		}
		/* Frames are stored leaf first; the tree grows from the root.
		 * Functions inlined into a frame stand above it, innermost on top. */
		for (uint32_t j = s->ps_nframes; !err && j-- > 0;) {
			uint32_t f = s->ps_frames[j];
			uint8_t kind = (uint8_t)frame_kind(&p->pr_frames[f]);

			err = child(g, cur, names[f], kind, &cur);
			if (!err)
				g->g_nodes[cur].n_count += s->ps_count;
			for (uint32_t k = p->pr_frames[f].pf_ninline; !err && k-- > 0;) {
				int n = fp_profile_inline_label_buf(p, f, k, &label, &cap);

				err = n < 0 ? n : intern_name(g, label, (size_t)n, &name);
				if (!err)
					err = child(g, cur, name, kind, &cur);
				if (!err)
					g->g_nodes[cur].n_count += s->ps_count;
			}
		}
	}
	g->g_total = g->g_nodes[0].n_count;
	free(names);
	free(label);
	return err;
}

static int sibling_cmp(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct node *x = &g->g_nodes[*(const uint32_t *)a];
	const struct node *y = &g->g_nodes[*(const uint32_t *)b];

	if (x->n_parent != y->n_parent)
		return x->n_parent < y->n_parent ? -1 : 1;
	return strcmp(name_of(g, x->n_name), name_of(g, y->n_name));
}

/* link_children: chain every node's children in name order. */
static int link_children(struct graph *g)
{
	size_t n = g->g_nnodes - 1;
	uint32_t *order = malloc((n ? n : 1) * sizeof(*order));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i + 1;
	qsort_r(order, n, sizeof(*order), sibling_cmp, g);
	for (size_t i = n; i-- > 0;) {
		struct node *c = &g->g_nodes[order[i]];
		struct node *parent = &g->g_nodes[c->n_parent];

		c->n_next = parent->n_first;
		parent->n_first = order[i];
	}
	free(order);
	return 0;
}

static int visible(const struct graph *g, const struct node *n)
{
	return n->n_count && n->n_count >= (g->g_total + MIN_SHARE - 1) / MIN_SHARE;
}

/* next_visible: the node after cur in a pre-order walk of the visible
 * boxes, with its start and depth set; NONE at the end.  Iterative, so
 * stack depth does not limit how deep a profile can be. */
static uint32_t next_visible(struct graph *g, uint32_t cur)
{
	struct node *n = &g->g_nodes[cur];

	if (visible(g, n) && n->n_first != NONE) {
		struct node *c = &g->g_nodes[n->n_first];

		c->n_start = n->n_start;
		c->n_depth = n->n_depth + 1;
		cur = n->n_first;
	} else {
		for (;;) {
			if (cur == 0)
				return NONE;
			n = &g->g_nodes[cur];
			if (n->n_next != NONE) {
				struct node *s = &g->g_nodes[n->n_next];

				s->n_start = n->n_start + n->n_count;
				s->n_depth = n->n_depth;
				cur = n->n_next;
				break;
			}
			cur = n->n_parent;
		}
	}
	return cur;
}

static double hue_to_rgb(double p, double q, double t)
{
	if (t < 0)
		t += 1;
	if (t > 1)
		t -= 1;
	if (t < 1.0 / 6)
		return p + (q - p) * 6 * t;
	if (t < 1.0 / 2)
		return q;
	if (t < 2.0 / 3)
		return p + (q - p) * (2.0 / 3 - t) * 6;
	return p;
}

/* color: the fill of a box.  Derived from a hash of the name, never from
 * its position, so a function keeps its colour across profiles. */
static void color(const char *name, uint8_t kind, int rgb[3])
{
	uint64_t h = fp_hash_string(FP_HASH_SEED, name);
	double v1 = (double)(h & 0xffff) / 0xffff;
	double v2 = (double)((h >> 16) & 0xffff) / 0xffff;
	double v3 = (double)((h >> 32) & 0xffff) / 0xffff;
	double hue, sat, light;

	switch (kind) {
	case NODE_ROOT:
		hue = 0, sat = 0, light = 0.80;
		break;
	case NODE_PROCESS:
		hue = 265 + 25 * v1, sat = 0.35 + 0.1 * v2, light = 0.74 + 0.06 * v3;
		break;
	case NODE_THREAD:
		hue = 300 + 25 * v1, sat = 0.30 + 0.1 * v2, light = 0.76 + 0.06 * v3;
		break;
	case NODE_KERNEL:
		hue = 185 + 30 * v1, sat = 0.50 + 0.2 * v2, light = 0.58 + 0.1 * v3;
		break;
	case NODE_KERNEL_UNRESOLVED:
		hue = 200 + 20 * v1, sat = 0.15 + 0.1 * v2, light = 0.68 + 0.06 * v3;
		break;
	case NODE_USER_UNRESOLVED:
		hue = 25 + 15 * v1, sat = 0.15 + 0.1 * v2, light = 0.68 + 0.06 * v3;
		break;
	case NODE_PYTHON: /* green, between the warm native and the cool kernel */
		hue = 95 + 40 * v1, sat = 0.45 + 0.2 * v2, light = 0.55 + 0.1 * v3;
		break;
	default: /* warm: red through orange to yellow */
		hue = 0 + 52 * v1, sat = 0.75 + 0.2 * v2, light = 0.55 + 0.1 * v3;
		break;
	}
	double q = light < 0.5 ? light * (1 + sat) : light + sat - light * sat;
	double p = 2 * light - q;
	hue /= 360;
	rgb[0] = (int)(255 * hue_to_rgb(p, q, hue + 1.0 / 3) + 0.5);
	rgb[1] = (int)(255 * hue_to_rgb(p, q, hue) + 0.5);
	rgb[2] = (int)(255 * hue_to_rgb(p, q, hue - 1.0 / 3) + 0.5);
}

/* put_escaped: s as XML character data or attribute value; at most max
 * code points of it (s is valid UTF-8 by now). */
static void put_escaped(FILE *f, const char *s, size_t max)
{
	for (size_t cps = 0; *s && cps < max; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c & 0xc0) != 0x80)
			cps++;
		switch (c) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&#39;", f);
			break;
		default:
			putc(c, f);
		}
	}
	/* A multi-byte character cut at max would be invalid: finish it. */
	while ((*s & 0xc0) == 0x80)
		putc(*s++, f);
}

static size_t code_points(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* put_fitting: as much of name as fits width pixels, ".." marking a cut;
 * nothing below three characters (a lone letter tells nothing). */
static void put_fitting(FILE *f, const char *name, double width)
{
	double room = (width - 6) / CHAR_WIDTH;
	size_t fit = room > 0 ? (size_t)room : 0;
	size_t len;

	if (fit < 3)
		return;
	len = code_points(name);
	if (len <= fit) {
		put_escaped(f, name, len);
		return;
	}
	put_escaped(f, name, fit - 2);
	fputs("..", f);
}

static const char style[] = "text{font-family:monospace;font-size:12px;fill:#000}\n"
			    "#title{font-size:17px;text-anchor:middle}\n"
			    ".btn{fill:#1f4f9a;cursor:pointer}\n"
			    ".btn:hover{text-decoration:underline}\n"
			    "#reset{visibility:hidden}\n"
			    "g.f{cursor:pointer}\n"
			    "g.f text{pointer-events:none}\n"
			    "g.f:hover rect{stroke:#000;stroke-width:0.6}\n"
			    "g.anc rect{fill-opacity:0.55}\n";

/* The script only reads the DOM written below: it holds no profile data, so
 * nothing from a profile ever lands inside the CDATA section. */
static const char script[] =
	"(function () {\n"
	"'use strict';\n"
	"var W = 1200, PAD = 10, CW = 7.2, HILITE = 'rgb(230,0,230)';\n"
	"var frames = [], byG = new Map(), total = 1, zoomed = null, lastTerm = '';\n"
	"var details, matched, reset;\n"
	"function $(id) { return document.getElementById(id); }\n"
	"function fit(name, w) {\n"
	"  var n = Math.floor((w - 6) / CW);\n"
	"  if (n < 3) return '';\n"
	"  var chars = Array.from(name);\n"
	"  return chars.length <= n ? name : chars.slice(0, n - 2).join('') + '..';\n"
	"}\n"
	"function show(f, x, w, ancestor) {\n"
	"  f.g.style.display = '';\n"
	"  f.g.classList.toggle('anc', ancestor);\n"
	"  f.rect.setAttribute('x', x.toFixed(2));\n"
	"  f.rect.setAttribute('width', w.toFixed(2));\n"
	"  f.text.setAttribute('x', (x + 3).toFixed(2));\n"
	"  f.text.textContent = fit(f.name, w);\n"
	"}\n"
	"function layout() {\n"
	"  var s0 = 0, n0 = total, d0 = -1, full = W - 2 * PAD;\n"
	"  if (zoomed) { s0 = zoomed.s; n0 = zoomed.n; d0 = zoomed.d; }\n"
	"  var scale = full / n0;\n"
	"  frames.forEach(function (f) {\n"
	"    var inside = f.s >= s0 && f.s + f.n <= s0 + n0;\n"
	"    if (f.d < d0 && f.s <= s0 && f.s + f.n >= s0 + n0) show(f, PAD, full, true);\n"
	"    else if (f.d >= d0 && inside) show(f, PAD + (f.s - s0) * scale, f.n * scale, false);\n"
	"    else f.g.style.display = 'none';\n"
	"  });\n"
	"  reset.style.visibility = zoomed ? 'visible' : 'hidden';\n"
	"}\n"
	"function zoom(f) { zoomed = f && f.d > 0 ? f : null; layout(); }\n"
	"function frameAt(el) {\n"
	"  for (; el && el.nodeType === 1; el = el.parentNode) {\n"
	"    var f = byG.get(el);\n"
	"    if (f) return f;\n"
	"  }\n"
	"  return null;\n"
	"}\n"
	"function search(term) {\n"
	"  var re = null, hits = [];\n"
	"  lastTerm = term || '';\n"
	"  if (lastTerm) {\n"
	"    try { re = new RegExp(lastTerm); }\n"
	"    catch (e) { details.textContent = 'Bad regular expression: ' + e.message; return; }\n"
	"  }\n"
	"  frames.forEach(function (f) {\n"
	"    var hit = re !== null && re.test(f.name);\n"
	"    f.rect.setAttribute('fill', hit ? HILITE : f.fill);\n"
	"    if (hit) hits.push(f);\n"
	"  });\n"
	"  if (!re) { matched.textContent = ''; return; }\n"
	"  // Boxes nest or are disjoint: count each outermost hit once.\n"
	"  hits.sort(function (a, b) { return a.s - b.s || b.n - a.n; });\n"
	"  var end = -1, sum = 0;\n"
	"  hits.forEach(function (f) { if (f.s >= end) { sum += f.n; end = f.s + f.n; } });\n"
	"  matched.textContent = 'Matched: ' + (100 * sum / total).toFixed(2) + '%';\n"
	"}\n"
	"function ask() {\n"
	"  var t = window.prompt('Highlight frames matching (regular expression, empty to clear):', lastTerm);\n"
	"  if (t !== null) search(t);\n"
	"}\n"
	"function init() {\n"
	"  details = $('details'); matched = $('matched'); reset = $('reset');\n"
	"  var gs = document.querySelectorAll('g.f');\n"
	"  for (var i = 0; i < gs.length; i++) {\n"
	"    var g = gs[i], title = g.querySelector('title').textContent;\n"
	"    var f = { g: g, rect: g.querySelector('rect'), text: g.querySelector('text'),\n"
	"      title: title, name: title.substring(0, title.lastIndexOf(' (')),\n"
	"      s: parseFloat(g.getAttribute('data-s')), n: parseFloat(g.getAttribute('data-n')),\n"
	"      d: parseInt(g.getAttribute('data-d'), 10) };\n"
	"    f.fill = f.rect.getAttribute('fill');\n"
	"    frames.push(f);\n"
	"    byG.set(g, f);\n"
	"    if (f.d === 0) total = Math.max(f.n, 1);\n"
	"  }\n"
	"  var box = $('frames');\n"
	"  box.addEventListener('mouseover', function (e) {\n"
	"    var f = frameAt(e.target);\n"
	"    if (f) details.textContent = f.title;\n"
	"  });\n"
	"  box.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  box.addEventListener('click', function (e) { var f = frameAt(e.target); if (f) zoom(f); });\n"
	"  reset.addEventListener('click', function () { zoom(null); });\n"
	"  $('search').addEventListener('click', ask);\n"
	"  document.addEventListener('keydown', function (e) {\n"
	"    if ((e.ctrlKey || e.metaKey) && (e.key === 'f' || e.key === 'F')) { e.preventDefault(); ask(); }\n"
	"    else if (e.key === 'Escape') { search(''); zoom(null); }\n"
	"  });\n"
	"}\n"
	"if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);\n"
	"else init();\n"
	"})();\n";

static void put_frame(FILE *f, const struct graph *g, const struct node *n, int height)
{
	const char *name = name_of(g, n->n_name);
	double full = SVG_WIDTH - 2 * SVG_PAD;
	double total = g->g_total ? (double)g->g_total : 1;
	double x = SVG_PAD + full * (double)n->n_start / total;
	double w = full * (double)n->n_count / total;
	int y = height - SVG_BOTTOM - (int)(n->n_depth + 1) * FRAME_HEIGHT;
	double share = g->g_total ? 100.0 * (double)n->n_count / total : 100.0;
	int rgb[3];

	color(name, n->n_kind, rgb);
	fprintf(f,
		"<g class=\"f\" data-s=\"%" PRIu64 "\" data-n=\"%" PRIu64 "\" data-d=\"%u\">"
		"<title>",
		n->n_start, n->n_count, n->n_depth);
	put_escaped(f, name, SIZE_MAX);
	if (g->g_offcpu)
		fprintf(f, " (%.3f ms off-CPU, %.2f%%)</title>", (double)n->n_count / 1e6, share);
	else
		fprintf(f, " (%" PRIu64 " sample%s, %.2f%%)</title>", n->n_count,
			n->n_count == 1 ? "" : "s", share);
	fprintf(f,
		"<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" rx=\"2\" "
		"fill=\"rgb(%d,%d,%d)\"/>",
		x, y, w, FRAME_HEIGHT - 1, rgb[0], rgb[1], rgb[2]);
	fprintf(f, "<text x=\"%.2f\" y=\"%.1f\">", x + 3, y + FRAME_HEIGHT - 4.5);
	put_fitting(f, name, w);
	fputs("</text></g>\n", f);
}

static void put_document(FILE *f, struct graph *g, const char *title)
{
	uint32_t max_depth = 0;

	for (uint32_t cur = 0; cur != NONE; cur = next_visible(g, cur))
		if (visible(g, &g->g_nodes[cur]) && g->g_nodes[cur].n_depth > max_depth)
			max_depth = g->g_nodes[cur].n_depth;
	int height = SVG_TOP + (int)(max_depth + 1) * FRAME_HEIGHT + SVG_BOTTOM;

	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
		"height=\"%d\" viewBox=\"0 0 %d %d\">\n",
		SVG_WIDTH, height, SVG_WIDTH, height);
	fputs("<title>", f);
	put_escaped(f, title, SIZE_MAX);
	fprintf(f, "</title>\n<style><![CDATA[\n%s]]></style>\n", style);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f7f5f0\"/>\n",
		SVG_WIDTH, height);
	fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\">", SVG_WIDTH / 2);
	put_escaped(f, title, SIZE_MAX);
	fputs("</text>\n", f);
	fprintf(f, "<text id=\"reset\" class=\"btn\" x=\"%d\" y=\"24\">Reset Zoom</text>\n",
		SVG_PAD);
	fprintf(f,
		"<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\" "
		"text-anchor=\"end\">Search</text>\n",
		SVG_WIDTH - SVG_PAD);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_PAD, height - 12);
	fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"> </text>\n",
		SVG_WIDTH - SVG_PAD, height - 12);
	fputs("<g id=\"frames\">\n", f);
	for (uint32_t cur = 0; cur != NONE; cur = next_visible(g, cur))
		if (visible(g, &g->g_nodes[cur]) || cur == 0)
			put_frame(f, g, &g->g_nodes[cur], height);
	fprintf(f, "</g>\n<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n",
		script);
}

int fp_svg_encode(const struct fp_profile *p, const char *title, int by_thread, char **buf,
		  size_t *len)
{
	struct graph g = { 0 };
	uint32_t title_id;
	char *text = NULL;
	size_t text_len = 0;
	FILE *f = NULL;
	int err;

	g.g_offcpu = p->pr_is_offcpu;
	err = build(p, &g, by_thread);
	/* The title goes through the same sanitising as every name. */
	if (!err)
		err = intern_name(&g, title ? title : "Flame Graph",
				  strlen(title ? title : "Flame Graph"), &title_id);
	if (!err)
		err = name_table(&g);
	if (!err)
		err = link_children(&g);
	/* A stream in memory: the document is printed, then handed over. */
	if (!err && !(f = open_memstream(&text, &text_len)))
		err = -ENOMEM;
	if (!err) {
		put_document(f, &g, name_of(&g, title_id));
		if (ferror(f))
			err = -ENOMEM;
		if (fclose(f) == EOF && !err)
			err = -ENOMEM;
		if (!err) {
			*buf = text;
			*len = text_len;
			text = NULL;
		}
	}
	free(text);
	fp_intern_free(g.g_names);
	free(g.g_name_ptrs);
	free(g.g_scratch);
	free(g.g_nodes);
	fp_indexset_free(&g.g_child_set);
	return err;
}
