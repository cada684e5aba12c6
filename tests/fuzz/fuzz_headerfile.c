/* fuzz_headerfile.c: libFuzzer target for --push-header-file's reader
 * (symbolizer/sinks/push_cli.c) and the log escaper (common/log.c).  The input is the
 * file (in a memfd); every header taken must pass fp_push_header_check,
 * and nothing is appended on failure.  The escaped input holds no control
 * byte and fits its buffer. */
#include "log.h"
#include "push.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Every bad file is logged: send fp_log's stderr (the FILE, not fd 2,
 * where the sanitizers and libFuzzer still report) to /dev/null. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	FILE *null = fopen("/dev/null", "w");

	(void)argc;
	(void)argv;
	if (null)
		stderr = null;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *headers[FP_PUSH_MAX_HEADERS], path[64], esc[256];
	size_t n = 0;
	const char *why;
	int fd, err;

	fp_log_escape((const char *)data, size, esc, sizeof(esc));
	if (strlen(esc) >= sizeof(esc))
		abort();
	for (const char *c = esc; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			abort();

	if ((fd = memfd_create("headers", MFD_CLOEXEC)) < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err = fp_push_header_file(path, headers, &n);
	close(fd);
	if (err && n)
		abort();
	if (n > FP_PUSH_MAX_HEADERS)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (fp_push_header_check(headers[i], &why) || strpbrk(headers[i], "\r\n"))
			abort();
		free(headers[i]);
	}
	return 0;
}
