/* cli.h: what every command-line front end needs: number arguments checked
 * against their range, and the clocks. */
#ifndef FP_CLI_H
#define FP_CLI_H

#include <stdint.h>
#include <time.h>

/* fp_parse_u32: s as a decimal in [lo, hi].  On error prints
 * "PROG: invalid WHAT 'S' (expected LO to HI)" and returns -1. */
int fp_parse_u32(const char *prog, const char *what, const char *s, uint32_t lo, uint32_t hi,
		 uint32_t *out);

/* fp_now_ns: clock clk in nanoseconds. */
uint64_t fp_now_ns(clockid_t clk);
/* fp_mono_ms: CLOCK_MONOTONIC in milliseconds (deadlines and back-offs). */
uint64_t fp_mono_ms(void);

#endif
