/* report.c: `fleetprof report FILE`, a profile as a table in the
 * terminal, for a user on a switch over ssh with no browser: functions by
 * self and total share (as `go tool pprof -top` and `perf report --stdio`
 * show them), or the call tree.  Reads pprof from any tool and folded
 * stacks (namestacks.h); the views are top.h's. */
#include "commands.h"
#include "cli.h"
#include "namestacks.h"
#include "top.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "fleetprof report"
#define DEFAULT_LIMIT 30
#define MAX_INDENT 60 /* columns of the call tree's indentation, at most */

static void report_usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof report [-s self|total] [-n N] [-p PROCESS] [--sample-type TYPE]\n"
		"                        [-t [--min-percent P]] FILE\n"
		"\n"
		"Prints a profile in the terminal: its functions by self and total share\n"
		"(self: samples where the function was running; total: samples where it\n"
		"was on the stack), or its call tree.  FILE is a pprof profile from any\n"
		"tool (gzip'd or not: fleetprof's .pb.gz, go tool pprof's, Pyroscope's)\n"
		"or folded stacks (fleetprof's .folded, flamegraph.pl's), whose first\n"
		"name on a line is the process; - reads standard input.\n"
		"\n"
		"  -s, --sort self|total    order of the functions (default self)\n"
		"  -n, --limit N            print the first N functions (default %d; 0: all)\n"
		"  -p, --process NAME       only the samples of this process\n"
		"      --sample-type TYPE   the pprof sample type to show (default: the\n"
		"                           profile's default, else its last, as pprof does)\n"
		"  -t, --tree               the call tree, from each process (or outermost\n"
		"                           function) down, with total and self shares\n"
		"      --min-percent P      --tree hides calls under P%% of the total\n"
		"                           (default 0.5; 0: none)\n"
		"  -h, --help               this help\n",
		DEFAULT_LIMIT);
}

/* read_all: the whole file (or standard input for "-"), at most
 * FP_NAMESTACKS_MAX_BYTES.  0 or a negative errno. */
static int read_all(const char *path, uint8_t **out, size_t *len)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0;
	int err = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 1 << 16;
			uint8_t *nb;
			if (cap > FP_NAMESTACKS_MAX_BYTES) {
				err = -EFBIG;
				break;
			}
			if (!(nb = realloc(buf, ncap))) {
				err = -ENOMEM;
				break;
			}
			buf = nb, cap = ncap;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	if (fd)
		close(fd);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* terminal_width: of standard output when it is a terminal, else
 * $COLUMNS, else 0 (no limit: a pipe or a file gets whole names). */
static int terminal_width(void)
{
	struct winsize ws;
	const char *cols = getenv("COLUMNS");

	if (isatty(STDOUT_FILENO) && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col)
		return ws.ws_col;
	if (cols && atoi(cols) > 0)
		return atoi(cols);
	return 0;
}

/* format_value: v in the profile's unit, as people read it. */
static void format_value(char *buf, size_t len, int64_t v, const char *unit)
{
	static const struct {
		const char *name;
		double scale;
	} ns[] = { { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 } };
	double a = v < 0 ? -(double)v : (double)v;
	size_t i;

	if (v && !strcmp(unit, "nanoseconds")) {
		for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			if (a >= ns[i].scale) {
				snprintf(buf, len, "%.2f%s", (double)v / ns[i].scale, ns[i].name);
				return;
			}
		snprintf(buf, len, "%" PRId64 "ns", v);
		return;
	}
	snprintf(buf, len, "%" PRId64, v);
}

static double share(int64_t v, uint64_t total)
{
	return total ? 100.0 * (double)v / (double)total : 0.0;
}

/* print_name: name after used columns, cut to the terminal's width
 * (names keep at least 8 columns). */
static void print_name(const char *name, int used, int width)
{
	int room = width ? width - used : 0, len = (int)strlen(name);

	if (width && room < 8)
		room = 8;
	if (width && len > room)
		printf("%.*s..\n", room - 2, name);
	else
		printf("%s\n", name);
}

/* indent_max: the tree's indentation, at most, so that names keep room. */
static int indent_max(int width)
{
	int room = width ? width - 17 - 24 : MAX_INDENT;

	return room < 0 ? 0 : room > MAX_INDENT ? MAX_INDENT : room;
}

static void print_top(const struct fp_namestacks *nk, const struct fp_top_row *rows, size_t n,
		      uint64_t sum, size_t limit, int width)
{
	char self[32], total[32];
	double cum = 0;
	size_t i;

	printf("%10s %7s %7s %10s %7s  %s\n", "self", "self%", "sum%", "total", "total%",
	       "function");
	for (i = 0; i < n && (!limit || i < limit); i++) {
		format_value(self, sizeof(self), rows[i].tr_self, nk->nk_unit);
		format_value(total, sizeof(total), rows[i].tr_total, nk->nk_unit);
		cum += share(rows[i].tr_self, sum);
		printf("%10s %6.2f%% %6.2f%% %10s %6.2f%%  ", self, share(rows[i].tr_self, sum),
		       cum, total, share(rows[i].tr_total, sum));
		print_name(fp_namestacks_name(nk, rows[i].tr_name), 51, width);
	}
	if (limit && n > limit)
		printf("(%zu more functions: --limit 0 shows them all)\n", n - limit);
}

/* print_tree: the tree depth first, larger totals first, hiding calls
 * under min percent of the total (and what is below them). */
static int print_tree(const struct fp_namestacks *nk, const struct fp_tree_node *nodes, size_t n,
		      uint64_t sum, double min, int width)
{
	uint32_t *stack = malloc(n * sizeof(*stack)), c; /* each node is pushed once */
	size_t top = 0, first;

	if (!stack)
		return -ENOMEM;
	printf("%7s %7s  %s\n", "total%", "self%", "call tree");
	for (first = top, c = nodes[0].tn_child; c; c = nodes[c].tn_next)
		stack[top++] = c;
	for (size_t a = first, b = top; a + 1 < b; a++, b--) { /* the largest on top */
		uint32_t t = stack[a];
		stack[a] = stack[b - 1], stack[b - 1] = t;
	}
	while (top) {
		const struct fp_tree_node *t = &nodes[stack[--top]];
		int indent = (int)t->tn_depth * 2 > indent_max(width) ? indent_max(width)
								      : (int)t->tn_depth * 2;
		char name[4200];

		if (share(t->tn_total, sum) < min && share(-t->tn_total, sum) < min)
			continue;
		snprintf(name, sizeof(name), "%s%s", fp_namestacks_name(nk, t->tn_name),
			 t->tn_process ? " [process]" : "");
		printf("%6.2f%% %6.2f%%  %*s", share(t->tn_total, sum), share(t->tn_self, sum),
		       indent, "");
		print_name(name, 17 + indent, width);
		for (first = top, c = t->tn_child; c; c = nodes[c].tn_next)
			stack[top++] = c;
		for (size_t a = first, b = top; a + 1 < b; a++, b--) {
			uint32_t x = stack[a];
			stack[a] = stack[b - 1], stack[b - 1] = x;
		}
	}
	free(stack);
	return 0;
}

int fp_cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'n' },
		{ "process", required_argument, NULL, 'p' },
		{ "sample-type", required_argument, NULL, 'T' },
		{ "tree", no_argument, NULL, 't' },
		{ "min-percent", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum fp_top_sort sort = FP_TOP_BY_SELF;
	const char *process = NULL, *sample_type = NULL;
	struct fp_namestacks *nk = NULL;
	struct fp_top_row *rows = NULL;
	struct fp_tree_node *nodes = NULL;
	uint32_t limit = DEFAULT_LIMIT, pid = FP_NAME_NONE;
	double min = 0.5;
	uint8_t *data = NULL;
	size_t len = 0, n = 0;
	uint64_t sum = 0;
	char err[512] = "";
	int c, tree = 0, e, status = 1;

	while ((c = getopt_long(argc, argv, "s:n:p:th", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!strcmp(optarg, "self") || !strcmp(optarg, "total")) {
				sort = !strcmp(optarg, "self") ? FP_TOP_BY_SELF : FP_TOP_BY_TOTAL;
				break;
			}
			fprintf(stderr, PROG ": invalid --sort '%s' (expected self or total)\n",
				optarg);
			return 2;
		case 'n':
			if (fp_parse_u32(PROG, "--limit", optarg, 0, UINT32_MAX, &limit))
				return 2;
			break;
		case 'p':
			process = optarg;
			break;
		case 'T':
			sample_type = optarg;
			break;
		case 't':
			tree = 1;
			break;
		case 'm': {
			char *end;
			errno = 0;
			min = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(min >= 0 && min <= 100)) {
				fprintf(stderr,
					PROG ": invalid --min-percent '%s' (expected 0 to 100)\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			report_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		report_usage(stderr);
		return 2;
	}
	if ((e = read_all(argv[optind], &data, &len))) {
		fprintf(stderr, PROG ": %s: %s\n", argv[optind],
			e == -EFBIG ? "larger than 1 GiB" : strerror(-e));
		return 1;
	}
	if (fp_namestacks_alloc(&nk)) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	if ((e = fp_namestacks_read(nk, data, len, sample_type, err, sizeof(err)))) {
		fprintf(stderr, PROG ": %s: %s\n", argv[optind],
			e == -ENOMEM ? "out of memory" : err);
		goto out;
	}
	if (process && (pid = fp_namestacks_find_process(nk, process)) == FP_NAME_NONE) {
		fprintf(stderr, PROG ": %s: no samples of process '%s'\n", argv[optind], process);
		goto out;
	}
	e = tree ? fp_top_tree(nk, pid, &nodes, &n)
		 : fp_top_functions(nk, pid, sort, &rows, &n, &sum);
	if (e) {
		fprintf(stderr, PROG ": %s\n", strerror(-e));
		goto out;
	}
	if (tree)
		sum = (uint64_t)nodes[0].tn_total;
	{
		char total[32], head[4400];
		format_value(total, sizeof(total), (int64_t)sum, nk->nk_unit);
		snprintf(head, sizeof(head), "%s, %s %s (%s), %zu stacks, process %.200s: %.4000s",
			 nk->nk_format, total, nk->nk_type, nk->nk_unit, nk->nk_nstacks,
			 process ? process : "all", argv[optind]);
		print_name(head, 0, terminal_width());
	}
	if (tree && print_tree(nk, nodes, n, sum, min, terminal_width())) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	if (!tree)
		print_top(nk, rows, n, sum, limit, terminal_width());
	status = 0;
out:
	free(rows);
	free(nodes);
	fp_namestacks_free(nk);
	free(data);
	return status;
}
