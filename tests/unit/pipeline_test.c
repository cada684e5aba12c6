/* pipeline_test.c: the symbol wait.  A profile whose frames name a
 * build-ID that a resolver worker is ingesting (a copy of libc's debug
 * file, not cached) waits for it and reaches its sink resolved; with no
 * wait it reaches the sink at once, unresolved.  Sequence numbers are
 * kept under the state directory; those older symbolizers left in the
 * output tree are moved there once, and damaged ones are left.  Several
 * sink workers keep each host's profiles in order, and run nicer than
 * the threads that submit. */
#include "check.h"
#include "cli.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "files.h"
#include "pipeline.h"
#include "resolver.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64], debug_copy[128];
static struct fp_build_id libc_id;

struct capture {
	int cp_calls;
	int cp_resolved; /* frames with a name in the last profile */
	uint64_t cp_seq;
	uint64_t cp_at_ns;
	int cp_nice, cp_policy; /* of the thread that ran the sink */
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
	c->cp_nice = getpriority(PRIO_PROCESS, (id_t)gettid());
	c->cp_policy = sched_getscheduler(0);
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
	struct fp_hello h = { .fh_session = 42,
			      .fh_host = "host-a",
			      .fh_boot_id = "",
			      .fh_kernel_release = "",
			      .fh_agent_version = "" };
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
	CHECK_EQ_INT(fp_resolver_wait(r, &libc_id, fp_now_ns(CLOCK_MONOTONIC) + 120000000000ull),
		     0);
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
	/* The worker's jobs done before the threads go: under ASan a child
	 * forked while another thread is in the allocator waits forever for
	 * its lock (GCC 12's runtime does not hold it across fork). */
	for (int i = 0; i < 3000; i++) {
		struct fp_resolver_stats rs;

		fp_resolver_stats(r, &rs);
		if (!rs.rs_running && !rs.rs_queue_depth)
			break;
		usleep(10000);
	}
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
	int nice;

	run("wait", 60000, &c, &ms, &ps);
	CHECK_EQ_INT(c.cp_calls, 1);
	CHECK_EQ_INT(c.cp_seq, 7);
	CHECK_EQ_INT(c.cp_resolved, 1);
	CHECK_EQ_INT(ps.pp_waited, 1);
	CHECK_EQ_INT(ps.pp_wait_timeouts, 0);
	printf("  with a wait: resolved after %llu ms\n", (unsigned long long)ms);

	/* A sink worker yields to the request threads (the process's nice,
	 * SCHED_OTHER). */
	errno = 0;
	nice = getpriority(PRIO_PROCESS, 0);
	CHECK_EQ_INT(errno, 0);
	CHECK_EQ_INT(c.cp_nice, nice + 10 > 19 ? 19 : nice + 10);
	CHECK_EQ_INT(c.cp_policy, SCHED_BATCH);
	CHECK_EQ_INT(sched_getscheduler(0), SCHED_OTHER);

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

/* put: a file of contents s at tmpdir/rel. */
static int put(const char *rel, const char *s)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	if (!(f = fopen(path, "w")))
		return -errno;
	fputs(s, f);
	return fclose(f) ? -errno : 0;
}

/* exists: whether tmpdir/rel is there (a symbolic link itself). */
static int exists(const char *rel)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	return lstat(path, &st) == 0;
}

/* NONE: last_seq found none (no test stores this one). */
#define NONE UINT64_MAX

static uint64_t last_seq(struct fp_pipeline *pl, const char *host, uint64_t session)
{
	char name[64];
	struct fp_hello h = { .fh_session = session, .fh_host = name };
	uint64_t seq = 0;

	snprintf(name, sizeof(name), "%s", host);
	return fp_pipeline_last_seq(pl, &h, &seq) ? NONE : seq;
}

static void test_migrate(void)
{
	static const char *const bad[] = {
		"out/h1/.session-000000000000002b", /* 21 digits */
		"out/h1/.session-000000000000002c", /* not digits */
		"out/h1/.session-000000000000002d", /* 2^64 */
		"out/h1/.session-000000000000002e", /* no newline */
		"out/h1/.session-000000000000002f", /* a symbolic link */
		"out/h1/.session-00000000000000zz", /* not a session id */
	};
	struct fp_pipeline_opts po = { 0 };
	struct fp_pipeline *pl;
	char state[128], path[256], target[256];
	size_t i;

	snprintf(state, sizeof(state), "%s/mstate", tmpdir);
	snprintf(path, sizeof(path), "%s/out/h1", tmpdir);
	CHECK_EQ_INT(fp_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/out/h2", tmpdir);
	CHECK_EQ_INT(fp_mkdirs(path), 0);
	snprintf(path, sizeof(path), "%s/elsewhere", tmpdir);
	CHECK_EQ_INT(fp_mkdirs(path), 0);
	CHECK_EQ_INT(put("out/h1/.session-000000000000002a", "7\n"), 0);
	CHECK_EQ_INT(put("out/h1/.session-000000000000002b", "123456789012345678901\n"), 0);
	CHECK_EQ_INT(put("out/h1/.session-000000000000002c", "12x\n"), 0);
	CHECK_EQ_INT(put("out/h1/.session-000000000000002d", "18446744073709551616\n"), 0);
	CHECK_EQ_INT(put("out/h1/.session-000000000000002e", "5"), 0);
	CHECK_EQ_INT(put("out/h1/.session-00000000000000zz", "5\n"), 0);
	CHECK_EQ_INT(put("out/h1/20231114T221320Z-7.folded", "a;b 1\n"), 0);
	CHECK_EQ_INT(put("elsewhere/.session-0000000000000001", "9\n"), 0);
	snprintf(path, sizeof(path), "%s/out/h1/.session-000000000000002f", tmpdir);
	snprintf(target, sizeof(target), "%s/out/h1/.session-000000000000002a", tmpdir);
	CHECK_EQ_INT(symlink(target, path), 0);
	/* A host directory that is a link to another place is not read. */
	snprintf(path, sizeof(path), "%s/out/h3", tmpdir);
	snprintf(target, sizeof(target), "%s/elsewhere", tmpdir);
	CHECK_EQ_INT(symlink(target, path), 0);
	/* Session 1 of h2: the new place already has a later interval. */
	CHECK_EQ_INT(put("out/h2/.session-0000000000000001", "99\n"), 0);
	CHECK_EQ_INT(put("out/h2/.session-0000000000000002", "18446744073709551614\n"), 0);
	snprintf(path, sizeof(path), "%s/mstate/sessions/h2", tmpdir);
	CHECK_EQ_INT(fp_mkdirs(path), 0);
	CHECK_EQ_INT(put("mstate/sessions/h2/0000000000000001", "100\n"), 0);

	po.po_state_dir = state;
	CHECK_EQ_INT(fp_pipeline_alloc(&pl, &po), 0);
	snprintf(path, sizeof(path), "%s/out", tmpdir);
	CHECK_EQ_INT(fp_pipeline_migrate(pl, path), 0);
	CHECK_EQ_INT(last_seq(pl, "h1", 42), 7);
	CHECK_EQ_INT(last_seq(pl, "h2", 1), 100);
	CHECK(last_seq(pl, "h2", 2) == UINT64_MAX - 1);
	CHECK(!exists("out/h1/.session-000000000000002a"));
	CHECK(!exists("out/h2/.session-0000000000000001"));
	CHECK(!exists("out/h2/.session-0000000000000002"));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(exists(bad[i]));
	CHECK_EQ_INT(last_seq(pl, "h1", 43), NONE);
	CHECK_EQ_INT(last_seq(pl, "h1", 44), NONE);
	CHECK_EQ_INT(last_seq(pl, "h1", 45), NONE);
	CHECK_EQ_INT(last_seq(pl, "h1", 46), NONE);
	CHECK_EQ_INT(last_seq(pl, "h1", 47), NONE);
	CHECK(exists("out/h1/20231114T221320Z-7.folded"));
	CHECK(exists("elsewhere/.session-0000000000000001"));
	CHECK_EQ_INT(last_seq(pl, "h3", 1), NONE);
	/* Once: a file found later stays where it is. */
	CHECK_EQ_INT(put("out/h2/.session-0000000000000003", "3\n"), 0);
	snprintf(path, sizeof(path), "%s/out", tmpdir);
	CHECK_EQ_INT(fp_pipeline_migrate(pl, path), 0);
	CHECK(exists("out/h2/.session-0000000000000003"));
	CHECK_EQ_INT(last_seq(pl, "h2", 3), NONE);
	fp_pipeline_free(pl);
}

/* ---- several sink workers ---- */

#define ORDER_HOSTS 16
#define ORDER_SEQS 50

struct order {
	pthread_mutex_t or_lock;
	uint64_t or_last[ORDER_HOSTS]; /* last seq sunk per host */
	int or_out_of_order;
	int or_calls;
	int or_threads_seen; /* distinct sink threads */
	pthread_t or_threads[FP_PIPELINE_WORKERS];
};

static int order_sink(void *arg, const struct fp_profile *p, const struct fp_hello *h, uint64_t seq)
{
	struct order *o = arg;
	int host = atoi(h->fh_host + 5), i;

	usleep(200); /* as a sync would: the others' turn */
	pthread_mutex_lock(&o->or_lock);
	if (seq <= o->or_last[host])
		o->or_out_of_order++;
	o->or_last[host] = seq;
	o->or_calls++;
	for (i = 0; i < o->or_threads_seen; i++)
		if (pthread_equal(o->or_threads[i], pthread_self()))
			break;
	if (i == o->or_threads_seen && i < FP_PIPELINE_WORKERS)
		o->or_threads[o->or_threads_seen++] = pthread_self();
	pthread_mutex_unlock(&o->or_lock);
	return 0;
}

/* Profiles of 16 hosts, interleaved, through the workers: every one is
 * sunk, each host's in the order submitted, by more than one thread, and
 * each host's last is the written seq the server would tell. */
static void test_workers_keep_order(void)
{
	struct order o = { .or_lock = PTHREAD_MUTEX_INITIALIZER };
	struct fp_pipeline_opts po = { 0 };
	struct fp_pipeline_stats ps;
	struct fp_pipeline *pl;
	char names[ORDER_HOSTS][16], state[128];
	struct fp_hello h = { .fh_session = 7 };
	struct fp_profile *p;
	int host, seq, ok = 1;

	snprintf(state, sizeof(state), "%s/ostate", tmpdir);
	po.po_state_dir = state;
	CHECK_EQ_INT(fp_pipeline_alloc(&pl, &po), 0);
	CHECK_EQ_INT(fp_pipeline_add_sink(pl, order_sink, &o), 0);
	CHECK_EQ_INT(fp_pipeline_start(pl, 0), 0);
	for (seq = 1; seq <= ORDER_SEQS; seq++) {
		for (host = 0; host < ORDER_HOSTS; host++) {
			snprintf(names[host], sizeof(names[host]), "host-%d", host);
			h.fh_host = names[host];
			ok &= fp_profile_alloc(&p, names[host], 0, 1000000000, 10000000) == 0 &&
			      fp_pipeline_submit(pl, p, &h, (uint64_t)seq) == 0;
		}
	}
	CHECK(ok);
	fp_pipeline_free(pl); /* runs every sink still queued */
	CHECK_EQ_INT(o.or_calls, ORDER_HOSTS * ORDER_SEQS);
	CHECK_EQ_INT(o.or_out_of_order, 0);
	CHECK(o.or_threads_seen > 1);
	printf("  %d profiles of %d hosts, %d sink threads\n", o.or_calls, ORDER_HOSTS,
	       o.or_threads_seen);
	/* Each host's sequence number was stored, and a new process finds it. */
	CHECK_EQ_INT(fp_pipeline_alloc(&pl, &po), 0);
	for (host = 0; host < ORDER_HOSTS; host++) {
		CHECK_EQ_INT(last_seq(pl, names[host], 7), ORDER_SEQS);
		h.fh_host = names[host];
		CHECK_EQ_INT(fp_pipeline_written(pl, &h), ORDER_SEQS);
	}
	fp_pipeline_stats(pl, &ps);
	CHECK_EQ_INT(ps.pp_state_errors, 0);
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
	RUN(test_migrate);
	RUN(test_workers_keep_order);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
