/* pipeline_test.c: the symbol wait.  A profile whose frames name a
 * build-ID that a resolver worker is ingesting (a copy of libc's debug
 * file, not cached) waits for it and reaches its sink resolved; with no
 * wait it reaches the sink at once, unresolved.  Sequence numbers are
 * kept under the state directory. */
#include "check.h"
#include "cli.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "pipeline.h"
#include "resolver.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64], debug_copy[128];
static struct fp_build_id libc_id;

struct capture {
	int cp_calls;
	int cp_resolved;            /* frames with a name in the last profile */
	uint64_t cp_seq;
	uint64_t cp_at_ns;
};

static int capture_sink(void *arg, const struct fp_profile *p, const struct fp_hello *h,
			uint64_t seq)
{
	struct capture *c = arg;
	size_t i;

	c->cp_calls++;
	c->cp_seq = seq;
	c->cp_resolved = 0;
	for (i = 0; i < p->pr_nframes; i++)
		c->cp_resolved += p->pr_frames[i].pf_function != NULL;
	c->cp_at_ns = fp_now_ns(CLOCK_MONOTONIC);
	return 0;
}

/* setup: libc's debug file copied (the mapping's path is the only source). */
static int setup(void)
{
	char hex[2 * FP_BUILD_ID_MAX + 1], src[256], cmd[512];
	int fd = open("/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		fd = open("/lib/aarch64-linux-gnu/libc.so.6", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	err = fp_elfnote_build_id(fd, &libc_id);
	close(fd);
	if (err)
		return err;
	fp_build_id_hex(&libc_id, hex);
	snprintf(src, sizeof(src), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	snprintf(debug_copy, sizeof(debug_copy), "%s/libc.debug", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp %s %s", src, debug_copy);
	return system(cmd) ? -ENOENT : 0;
}

/* run: one profile naming libc at offset 0x1000 (code in every libc),
 * through a pipeline waiting wait_ms; fresh cache each time. */
static void run(const char *name, uint32_t wait_ms, struct capture *c, uint64_t *elapsed_ms,
		struct fp_pipeline_stats *ps)
{
	char cache[128], state[128];
	struct fp_resolver_opts ro = { .ro_local_files = 1 };
	struct fp_pipeline_opts po = { 0 };
	struct fp_hello h = { .fh_session = 42, .fh_host = "host-a", .fh_boot_id = "",
			      .fh_kernel_release = "", .fh_agent_version = "" };
	struct fp_resolver *r = NULL;
	struct fp_pipeline *pl = NULL;
	struct fp_profile *p = NULL;
	struct fp_lookup *l = NULL;
	struct fp_resolved res;
	uint32_t m, f;
	uint64_t t0;

	snprintf(cache, sizeof(cache), "%s/cache-%s", tmpdir, name);
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	ro.ro_cache_dir = cache;
	po.po_state_dir = state;
	memset(c, 0, sizeof(*c));
	CHECK_EQ_INT(fp_resolver_open(&r, &ro), 0);
	CHECK_EQ_INT(fp_resolver_start(r, 1, 4), 0);
	po.po_resolver = r;
	CHECK_EQ_INT(fp_pipeline_alloc(&pl, &po), 0);
	CHECK_EQ_INT(fp_pipeline_add_sink(pl, capture_sink, c), 0);
	CHECK_EQ_INT(fp_pipeline_start(pl, wait_ms), 0);
	CHECK_EQ_INT(fp_profile_alloc(&p, "host-a", 0, 1000000000, 10000000), 0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, debug_copy, &m), 0);
	/* As a session makes it: a look-up that queues the file. */
	CHECK_EQ_INT(fp_resolver_begin(r, &l), 0);
	fp_resolver_frame(l, FP_MAP_USER, &libc_id, debug_copy, 0, 0x30000, &res);
	fp_resolver_end(l);
	CHECK(res.rs_function == NULL);
	CHECK(fp_resolver_busy(r, &libc_id));
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x30000, 0, NULL, NULL, &f), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, &f, 1, 1, 1, "t", "p", "", 3), 0);
	t0 = fp_now_ns(CLOCK_MONOTONIC);
	CHECK_EQ_INT(fp_pipeline_submit(pl, p, &h, 7), 0);
	CHECK_EQ_INT(fp_resolver_wait(r, &libc_id, fp_now_ns(CLOCK_MONOTONIC) + 120000000000ull), 0);
	/* The sink has run once the count says so (both under the lock). */
	for (int i = 0; i < 500; i++) {
		fp_pipeline_stats(pl, ps);
		if (ps->pp_profiles)
			break;
		usleep(10000);
	}
	CHECK_EQ_INT(ps->pp_profiles, 1);
	/* What the server tells the agent: interval 7 is through the sinks,
	 * and nothing of another session or host. */
	CHECK_EQ_INT(fp_pipeline_written(pl, &h), 7);
	h.fh_session = 43;
	CHECK_EQ_INT(fp_pipeline_written(pl, &h), 0);
	h.fh_session = 42, h.fh_host = "host-b";
	CHECK_EQ_INT(fp_pipeline_written(pl, &h), 0);
	*elapsed_ms = (c->cp_at_ns - t0) / 1000000;
	fp_pipeline_free(pl);
	fp_resolver_close(r);
}

static void test_waits_for_symbols(void)
{
	struct fp_pipeline_stats ps = { 0 };
	struct capture c;
	uint64_t ms;
	uint64_t seq = 0;
	struct fp_pipeline_opts po = { .po_state_dir = NULL };
	struct fp_pipeline *pl;
	char state[128];
	struct fp_hello h = { .fh_session = 42, .fh_host = "host-a" };

	run("wait", 60000, &c, &ms, &ps);
	CHECK_EQ_INT(c.cp_calls, 1);
	CHECK_EQ_INT(c.cp_seq, 7);
	CHECK_EQ_INT(c.cp_resolved, 1);
	CHECK_EQ_INT(ps.pp_waited, 1);
	CHECK_EQ_INT(ps.pp_wait_timeouts, 0);
	printf("  with a wait: resolved after %llu ms\n", (unsigned long long)ms);

	run("nowait", 0, &c, &ms, &ps);
	CHECK_EQ_INT(c.cp_calls, 1);
	CHECK_EQ_INT(c.cp_resolved, 0);
	CHECK_EQ_INT(ps.pp_waited, 0);
	printf("  without: sunk after %llu ms\n", (unsigned long long)ms);

	/* The last interval of the session, for a restarted server. */
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	po.po_state_dir = state;
	CHECK_EQ_INT(fp_pipeline_alloc(&pl, &po), 0);
	CHECK_EQ_INT(fp_pipeline_written(pl, &h), 0);
	CHECK_EQ_INT(fp_pipeline_last_seq(pl, &h, &seq), 0);
	CHECK_EQ_INT(seq, 7);
	CHECK_EQ_INT(fp_pipeline_written(pl, &h), 7); /* known from the state */
	h.fh_session = 43;
	CHECK_EQ_INT(fp_pipeline_last_seq(pl, &h, &seq), -ENOENT);
	fp_pipeline_free(pl);
}

int main(void)
{

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "fp-pipeline"))
		return 1;
	if (setup()) {
		printf("FAIL: %s:setup (libc's debug file, libc6-dbg)\n", __FILE__);
		return 1;
	}
	RUN(test_waits_for_symbols);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
