/* log_test.c: fp_log_escape's table, and that a logged line stays one line
 * whatever the strings in it hold (a host name with a newline cannot forge
 * a second line). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"

static void test_escape_table(void)
{
	static const struct {
		const char *in;
		size_t n, len;
		const char *want;
	} cases[] = {
		{ "plain host-1", 64, 64, "plain host-1" },
		{ "evil\nfleetprof: forged", 64, 64, "evil\\nfleetprof: forged" },
		{ "cr\rtab\t", 64, 64, "cr\\rtab\\t" },
		{ "\x1b[31mred\x7f", 64, 64, "\\x1b[31mred\\x7f" },
		{ "caf\xc3\xa9", 64, 64, "caf\xc3\xa9" }, /* UTF-8 kept */
		{ "back\\slash", 64, 64, "back\\slash" },
		{ "abcdef", 3, 64, "abc" },         /* n bounds the input */
		{ "abcdefghij", 64, 8, "abcd..." }, /* cut, marked */
		{ "ab\ncdefgh", 64, 6, "ab..." },   /* an escape that does not fit */
		{ "abc", 64, 4, "abc" },            /* exactly fits */
		{ "", 64, 1, "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[64];
		const char *got = fp_log_escape(cases[i].in, cases[i].n, buf, cases[i].len);

		if (strcmp(got, cases[i].want))
			fprintf(stderr, "  case %zu: got '%s', want '%s'\n", i, got, cases[i].want);
		CHECK(got == buf && !strcmp(got, cases[i].want));
	}
}

/* logged: what fp_warnx("session from %s", host) writes to stderr. */
static size_t logged(const char *host, char *out, size_t len)
{
	char path[] = "/tmp/log_test.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	ssize_t n;

	if (fd < 0 || saved < 0)
		return 0;
	fflush(stderr);
	dup2(fd, 2);
	fp_warnx("session from %s (kernel %s)", host, "6.1");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, out, len - 1, 0);
	close(fd);
	unlink(path);
	out[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

static size_t count(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

static void test_one_line(void)
{
	char out[8192], host[3000];

	fp_log_init("log_test", 0, 0);
	logged("sw1\nlog_test: FORGED accepted\r\x1b[2K", out, sizeof(out));
	CHECK_EQ_INT(count(out, '\n'), 1);
	CHECK(!strcmp(out, "log_test: session from sw1\\nlog_test: FORGED accepted\\r\\x1b[2K "
			   "(kernel 6.1)\n"));
	CHECK(!strstr(out, "\nlog_test: FORGED"));

	/* Only newlines, more than the line holds: still one line, cut. */
	memset(host, '\n', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	logged(host, out, sizeof(out));
	CHECK_EQ_INT(count(out, '\n'), 1);
	CHECK(strlen(out) > 1000 && strstr(out, "\\n\\n...\n") != NULL);
}

int main(void)
{
	RUN(test_escape_table);
	RUN(test_one_line);
	return CHECK_DONE();
}
