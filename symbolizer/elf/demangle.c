/* demangle.c: Itanium C++ names demangled, as llvm-symbolizer writes them,
 * with what one name may cost bounded before the demangler starts. */
#include "demangle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* Longer names are not demangled: the runtime's demangler keeps its tables
 * on the stack, sized by the name, and recurses for every level of nesting
 * (its own limit stops it near 256 levels, some 250 KiB of stack).
 * Callers' threads need ordinary stacks. */
#define MAX_DEMANGLE_LEN 4096

/* Substitutions and template parameters let a few bytes of mangled name
 * repeat everything printed before them, so a 300-byte name can demangle
 * to gigabytes, and __cxa_demangle cannot be stopped once started.  Every
 * such reference is counted as if it could multiply the output by 1.5 (the
 * densest nesting found grows by about 1.44 per reference); names whose
 * estimate exceeds this stay mangled.  Real names are far below: of 72,000
 * names exported by LLVM and libstdc++, 7 exceed it, while the largest
 * real expansion is 18 times the mangled length. */
#define MAX_DEMANGLE_ESTIMATE (64ull << 20)

static int is_seq_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
}

/* demangle_estimate: an over-estimate of the demangled length (see
 * MAX_DEMANGLE_ESTIMATE), saturating just above it. */
static uint64_t demangle_estimate(const char *name, size_t len)
{
	uint64_t est = len;

	for (size_t i = 0; i < len; i++) {
		size_t j;

		if (name[i] != 'S' && name[i] != 'T')
			continue;
		/* S<seq>_, S_, T<n>_, T_ */
		for (j = i + 1; j < len && is_seq_char(name[j]); j++)
			;
		if (j < len && name[j] == '_') {
			est += est / 2 + 1;
			if (est > MAX_DEMANGLE_ESTIMATE)
				return MAX_DEMANGLE_ESTIMATE + 1;
		}
		i = j - 1; /* a run is scanned once */
	}
	return est;
}

/* llvm_spacing: the runtime writes "operator< <int>" and "operator<< <T>"
 * where llvm-symbolizer writes "operator<<int>" and "operator<<<T>": drop
 * the space, in place. */
static void llvm_spacing(char *s)
{
	char *p = s;

	while ((p = strstr(p, "operator<")) != NULL) {
		p += 9;
		if (*p == '<')
			p++;
		if (p[0] == ' ' && p[1] == '<')
			memmove(p, p + 1, strlen(p + 1) + 1);
	}
}

char *fp_demangle(const char *name)
{
	const char *dot;
	char *out;
	size_t len;
	int status = -1;

	/* Only symbols: the runtime would also "demangle" plain C names that
	 * happen to spell a type, such as "f" (float). */
	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	len = strnlen(name, MAX_DEMANGLE_LEN + 1);
	if (len > MAX_DEMANGLE_LEN || demangle_estimate(name, len) > MAX_DEMANGLE_ESTIMATE)
		return NULL;
	/* A suffix after the mangled name (".cold", ".isra.0", ".part.1")
	 * is shown as llvm-symbolizer shows it, "f() (.isra.0)", rather than
	 * the runtime's "f() [clone .isra.0]": the whole tail, once. */
	dot = memchr(name, '.', len);
	if (dot) {
		char prefix[MAX_DEMANGLE_LEN + 1];
		char *full;
		size_t dlen;

		memcpy(prefix, name, (size_t)(dot - name));
		prefix[dot - name] = '\0';
		out = __cxa_demangle(prefix, NULL, NULL, &status);
		if (status != 0) {
			free(out);
			return NULL;
		}
		llvm_spacing(out);
		dlen = strlen(out);
		full = malloc(dlen + 3 + (len - (size_t)(dot - name)) + 1);
		if (full)
			sprintf(full, "%s (%s)", out, dot);
		free(out);
		return full;
	}
	out = __cxa_demangle(name, NULL, NULL, &status);
	if (status != 0) {
		free(out);
		return NULL;
	}
	llvm_spacing(out);
	return out;
}
