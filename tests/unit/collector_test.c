/* collector_test.c: from synthetic BPF samples to batches
 * (device/collector.c): frame resolution (kernel, module, build-ID, IP
 * and raw user frames against this very process), aggregation, intervals,
 * and which definitions (mappings, threads, stack trie nodes) each batch
 * carries; Python frames' offsets folded to their line's first. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collector.h"
#include "container.h"
#include "elfnote.h"
#include "pyline.h"
#include "python.h"

#define KTEXT 0xffffffff81000000ull
#define MODBASE 0xffffffffc0000000ull
#define MODSIZE 0x10000ull
#define DOCKER_ROOT "/nonexistent-docker-root"

static struct fp_kmodule modules[1] = {
	{ "foo", MODBASE, MODSIZE, { 20, { 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
					   0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
					   0x22, 0x22, 0x22, 0x22, 0x22, 0x01 } } },
};
static struct fp_kernel kern;

static const unsigned char madeup_id[20] = { 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67,
					     0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45,
					     0x67, 0x89, 0xab, 0xcd, 0xef, 0x01 };

/* What the test knows of itself. */
static char exe[4096];
static struct fp_build_id exe_id;
static char self_comm[FP_COMM_LEN];
static char self_container[128];

/* Functions of the test binary whose addresses go into user stacks. */
__attribute__((noinline)) static int probe_a(int x)
{
	return x + 1;
}

__attribute__((noinline)) static int probe_b(int x)
{
	return x * 2 + 3;
}

static int find_main_program(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(uint64_t *)arg = info->dlpi_addr;
	return 1;
}

/* file_offset: where ip lies in the test binary, from the ELF program
 * headers of the file and the load bias. */
static uint64_t file_offset(uint64_t ip)
{
	uint64_t bias = 0, vaddr, off = UINT64_MAX;
	Elf64_Ehdr eh;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return off;
	dl_iterate_phdr(find_main_program, &bias);
	vaddr = ip - bias;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    sizeof(ph))
				break;
			if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && vaddr >= ph.p_vaddr &&
			    vaddr < ph.p_vaddr + ph.p_filesz) {
				off = vaddr - ph.p_vaddr + ph.p_offset;
				break;
			}
		}
	}
	close(fd);
	return off;
}

static int setup(void)
{
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f;
	int fd;

	if (n <= 0)
		return -1;
	exe[n] = '\0';
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fp_elfnote_build_id(fd, &exe_id) != 0)
		return -1;
	close(fd);
	f = fopen("/proc/self/comm", "re");
	if (!f || !fgets(self_comm, sizeof(self_comm), f))
		return -1;
	fclose(f);
	self_comm[strcspn(self_comm, "\n")] = '\0';
	fp_container_name("/proc", DOCKER_ROOT, (uint32_t)getpid(), self_container,
			  sizeof(self_container));

	memset(&kern, 0, sizeof(kern));
	kern.kn_text = KTEXT;
	kern.kn_build_id.fb_len = 20;
	memset(kern.kn_build_id.fb_data, 0x11, 20);
	snprintf(kern.kn_release, sizeof(kern.kn_release), "6.1.0-test");
	kern.kn_nmodules = 1;
	kern.kn_modules = modules;
	return 0;
}

static uint32_t pid_max(void)
{
	char line[32];
	uint32_t v = 4194304;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");

	if (f) {
		if (fgets(line, sizeof(line), f))
			v = (uint32_t)strtoul(line, NULL, 10);
		fclose(f);
	}
	return v;
}

/* A sample: header, user frames, kernel frames. */
struct sample {
	struct fp_bpf_sample hdr;
	struct bpf_stack_build_id u[FP_STACK_DEPTH + 8];
	uint64_t k[FP_STACK_DEPTH + 8];
};

static struct bpf_stack_build_id valid_frame(const unsigned char *id, uint64_t offset)
{
	struct bpf_stack_build_id u;

	memset(&u, 0, sizeof(u));
	u.status = BPF_STACK_BUILD_ID_VALID;
	memcpy(u.build_id, id, BPF_BUILD_ID_SIZE);
	u.offset = offset;
	return u;
}

static struct bpf_stack_build_id ip_frame(uint64_t ip)
{
	struct bpf_stack_build_id u;

	memset(&u, 0, sizeof(u));
	u.status = BPF_STACK_BUILD_ID_IP;
	u.ip = ip;
	return u;
}

static struct bpf_stack_build_id empty_frame(void)
{
	struct bpf_stack_build_id u;

	memset(&u, 0, sizeof(u));
	u.status = BPF_STACK_BUILD_ID_EMPTY;
	return u;
}

static void make_sample(struct sample *s, uint32_t pid, uint32_t tid, const char *comm,
			const uint64_t *kips, size_t nk, const struct bpf_stack_build_id *u,
			size_t nu)
{
	memset(s, 0, sizeof(*s));
	s->hdr.pid = pid;
	s->hdr.tid = tid;
	s->hdr.cgroup_id = 0x1234;
	memcpy(s->hdr.comm, comm, strnlen(comm, sizeof(s->hdr.comm)));
	if (nk)
		memcpy(s->k, kips, nk * sizeof(*kips));
	if (nu)
		memcpy(s->u, u, nu * sizeof(*u));
	s->hdr.kstack_bytes = (uint32_t)(nk * sizeof(*kips));
	s->hdr.ustack_bytes = (uint32_t)(nu * sizeof(*u));
}

static void add(struct fp_collector *c, const struct sample *s, int times)
{
	while (times-- > 0)
		fp_collector_add(c, &s->hdr, s->u, s->k);
}

/* The three samples most tests use.
 *  A: kernel, module, and unmapped kernel frames; user frames by made-up
 *     build-ID, by IP in this binary, by made-up build-ID again, and an
 *     empty one (dropped).
 *  B: the same thread, other frames in the same mappings.
 *  C: A's frames on another thread. */
static struct sample sa, sb, sc;
static uint64_t ip_a, ip_b;

static void make_samples(void)
{
	uint32_t pid = (uint32_t)getpid();
	const uint64_t ka[] = { KTEXT + 0x234567, MODBASE + 0x123, 0xffffffff80000000ull };
	const uint64_t kb[] = { KTEXT + 0x1000 };

	ip_a = (uint64_t)(uintptr_t)&probe_a + 1; /* inside the function */
	ip_b = (uint64_t)(uintptr_t)&probe_b + 1;
	const struct bpf_stack_build_id ua[] = { valid_frame(madeup_id, 0x1234), ip_frame(ip_a),
						 valid_frame(madeup_id, 0x5678), empty_frame() };
	const struct bpf_stack_build_id ub[] = { ip_frame(ip_b), valid_frame(madeup_id, 0x1234) };

	/* not the main thread, whose name would be the process's */
	make_sample(&sa, pid, pid + 2, "worker-1", ka, 3, ua, 4);
	make_sample(&sb, pid, pid + 2, "worker-1", kb, 1, ub, 2);
	make_sample(&sc, pid, pid + 1, "worker-2", ka, 3, ua, 4);
}

/* A peer: the definitions it was sent, as the symbolizer keeps them. */
#define PEER_MAPS 64
#define PEER_THREADS 64
#define PEER_NODES 16384

struct peer {
	struct {
		int defined;
		uint8_t kind;
		struct fp_build_id id;
		char path[4096];
	} maps[PEER_MAPS];
	struct {
		int defined;
		struct fp_thread t;
		char container[128];
	} threads[PEER_THREADS];
	struct {
		int defined;
		uint32_t parent;
		struct fp_frame frame;
	} nodes[PEER_NODES];
	int dup_defs;     /* a definition sent twice (without a release in between) */
	int bad_refs;     /* a reference to something never defined */
	int late_parents; /* a node defined before its parent */
};

static struct peer *peer_new(void)
{
	return calloc(1, sizeof(struct peer));
}

static void peer_forget(struct peer *p)
{
	for (size_t i = 0; i < PEER_MAPS; i++)
		p->maps[i].defined = 0;
	for (size_t i = 0; i < PEER_THREADS; i++)
		p->threads[i].defined = 0;
	for (size_t i = 0; i < PEER_NODES; i++)
		p->nodes[i].defined = 0;
}

/* peer_stack: the frames of the stack ending in leaf, leaf first; the
 * depth, or -1 if the chain is broken. */
static int peer_stack(const struct peer *p, uint32_t leaf, struct fp_frame *frames)
{
	int n = 0;

	for (uint32_t node = leaf; node != FP_NODE_NONE; node = p->nodes[node].parent) {
		if (node >= PEER_NODES || !p->nodes[node].defined || n >= FP_MAX_FRAMES)
			return -1;
		frames[n++] = p->nodes[node].frame;
	}
	return n;
}

/* peer_take: learn b's definitions and check every reference. */
static void peer_take(struct peer *p, const struct fp_batch *b)
{
	size_t i;

	for (i = 0; i < b->fb_nmappings; i++) {
		const struct fp_mapping *m = &b->fb_mappings[i];
		if (m->fm_id >= PEER_MAPS) {
			CHECK(m->fm_id < PEER_MAPS);
			continue;
		}
		p->dup_defs += p->maps[m->fm_id].defined;
		p->maps[m->fm_id].defined = 1;
		p->maps[m->fm_id].kind = m->fm_kind;
		p->maps[m->fm_id].id = m->fm_build_id;
		CHECK(m->fm_path != NULL);
		snprintf(p->maps[m->fm_id].path, sizeof(p->maps[m->fm_id].path), "%s",
			 m->fm_path ? m->fm_path : "(null)");
	}
	for (i = 0; i < b->fb_nthreads; i++) {
		const struct fp_thread *t = &b->fb_threads[i];
		if (t->ft_id >= PEER_THREADS) {
			CHECK(t->ft_id < PEER_THREADS);
			continue;
		}
		p->dup_defs += p->threads[t->ft_id].defined;
		p->threads[t->ft_id].defined = 1;
		p->threads[t->ft_id].t = *t;
		CHECK(t->ft_container != NULL);
		snprintf(p->threads[t->ft_id].container, 128, "%s",
			 t->ft_container ? t->ft_container : "(null)");
		p->threads[t->ft_id].t.ft_container = NULL;
	}
	for (i = 0; i < b->fb_nnodes; i++) {
		const struct fp_node *n = &b->fb_nodes[i];
		uint32_t m = n->fn_frame.ff_mapping;
		if (n->fn_id >= PEER_NODES) {
			CHECK(n->fn_id < PEER_NODES);
			continue;
		}
		/* Parents first, and mappings with (or before) their nodes. */
		if (n->fn_parent != FP_NODE_NONE &&
		    (n->fn_parent >= PEER_NODES || !p->nodes[n->fn_parent].defined))
			p->late_parents++;
		if (m != FP_MAPPING_NONE && (m >= PEER_MAPS || !p->maps[m].defined))
			p->bad_refs++;
		p->dup_defs += p->nodes[n->fn_id].defined;
		p->nodes[n->fn_id].defined = 1;
		p->nodes[n->fn_id].parent = n->fn_parent;
		p->nodes[n->fn_id].frame = n->fn_frame;
	}
	for (i = 0; i < b->fb_ncounts; i++) {
		const struct fp_count *c = &b->fb_counts[i];
		struct fp_frame frames[FP_MAX_FRAMES];
		if (c->fc_thread >= PEER_THREADS || !p->threads[c->fc_thread].defined)
			p->bad_refs++;
		if (peer_stack(p, c->fc_node, frames) < 0)
			p->bad_refs++;
		CHECK(c->fc_count > 0);
	}
}

static void check_peer_clean(const struct peer *p)
{
	CHECK_EQ_INT(p->dup_defs, 0);
	CHECK_EQ_INT(p->bad_refs, 0);
	CHECK_EQ_INT(p->late_parents, 0);
}

/* find_count: the count of (thread, leaf) in iv whose count is n. */
static const struct fp_count *count_with(const struct fp_interval *iv, uint32_t n)
{
	for (size_t i = 0; i < iv->fi_ncounts; i++)
		if (iv->fi_counts[i].fc_count == n)
			return &iv->fi_counts[i];
	return NULL;
}

static uint32_t count_of(const struct fp_interval *iv, uint32_t thread, uint32_t node)
{
	for (size_t i = 0; i < iv->fi_ncounts; i++)
		if (iv->fi_counts[i].fc_thread == thread && iv->fi_counts[i].fc_node == node)
			return iv->fi_counts[i].fc_count;
	return 0;
}

static struct fp_collector *new_collector(void)
{
	struct fp_collector *c = NULL;

	CHECK_EQ_INT(fp_collector_alloc(&c, "/proc", DOCKER_ROOT, &kern), 0);
	return c;
}

/* The first interval: A x5, B x3, C x2, interleaved. */
static struct fp_collector *collect_abc(struct fp_interval *iv)
{
	struct fp_collector *c = new_collector();

	if (!c)
		return NULL;
	CHECK_EQ_INT(fp_collector_cut(c, 0, 1000, iv), 0); /* the interval starts */
	fp_interval_fini(iv);
	add(c, &sa, 2);
	add(c, &sb, 1);
	add(c, &sc, 2);
	add(c, &sa, 3);
	add(c, &sb, 2);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 2000, iv), 0);
	return c;
}

static void test_aggregate_and_cut(void)
{
	struct fp_interval iv;
	struct fp_collector *c = collect_abc(&iv);
	const struct fp_count *a, *b, *cc;
	struct fp_count ca = { 0 }, cb = { 0 }, ccc = { 0 };

	if (!c)
		return;
	CHECK_EQ_INT(iv.fi_seq, 1);
	CHECK_EQ_INT(iv.fi_start_ns, 1000);
	CHECK_EQ_INT(iv.fi_end_ns, 2000);
	CHECK_EQ_INT(iv.fi_ncounts, 3); /* identical samples are counted together */
	CHECK_EQ_INT(iv.fi_samples, 10);
	CHECK_EQ_INT(iv.fi_lost.fl_samples, 0);
	a = count_with(&iv, 5);
	b = count_with(&iv, 3);
	cc = count_with(&iv, 2);
	CHECK(a && b && cc);
	if (a && b && cc) {
		ca = *a, cb = *b, ccc = *cc;
		/* A and B: one thread, two stacks.  C: A's stack, another thread. */
		CHECK_EQ_INT(ca.fc_thread, cb.fc_thread);
		CHECK(ca.fc_node != cb.fc_node);
		CHECK(ccc.fc_thread != ca.fc_thread);
		CHECK_EQ_INT(ccc.fc_node, ca.fc_node);
		CHECK(ca.fc_node != FP_NODE_NONE && cb.fc_node != FP_NODE_NONE);
	}
	fp_interval_fini(&iv);
	CHECK(iv.fi_counts == NULL && iv.fi_ncounts == 0);

	/* The cut reset the counts: an empty interval. */
	CHECK_EQ_INT(fp_collector_cut(c, 2, 3000, &iv), 0);
	CHECK_EQ_INT(iv.fi_seq, 2);
	CHECK_EQ_INT(iv.fi_start_ns, 2000);
	CHECK_EQ_INT(iv.fi_end_ns, 3000);
	CHECK_EQ_INT(iv.fi_ncounts, 0);
	CHECK_EQ_INT(iv.fi_samples, 0);
	fp_interval_fini(&iv);

	/* Later samples are counted against the same thread and leaf. */
	add(c, &sb, 4);
	add(c, &sa, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 3, 4000, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 2);
	CHECK_EQ_INT(count_of(&iv, ca.fc_thread, ca.fc_node), 1);
	CHECK_EQ_INT(count_of(&iv, cb.fc_thread, cb.fc_node), 4);
	CHECK_EQ_INT(count_of(&iv, ccc.fc_thread, ccc.fc_node), 0);
	CHECK_EQ_INT(iv.fi_samples, 5);
	fp_interval_fini(&iv);

	/* A sample without frames: counted, with no node. */
	struct sample bare;
	make_sample(&bare, (uint32_t)getpid(), 99, "bare", NULL, 0, NULL, 0);
	add(c, &bare, 3);
	CHECK_EQ_INT(fp_collector_cut(c, 4, 5000, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 1);
	if (iv.fi_ncounts == 1) {
		CHECK_EQ_INT(iv.fi_counts[0].fc_node, FP_NODE_NONE);
		CHECK_EQ_INT(iv.fi_counts[0].fc_count, 3);
	}
	fp_interval_fini(&iv);

	/* The first interval of a collector starts when the collector is made
	 * (not at its own end, which would make it last no time at all). */
	struct timespec before, after;
	clock_gettime(CLOCK_REALTIME, &before);
	struct fp_collector *c2 = new_collector();
	clock_gettime(CLOCK_REALTIME, &after);
	if (c2) {
		uint64_t lo = (uint64_t)before.tv_sec * 1000000000ull + (uint64_t)before.tv_nsec;
		uint64_t hi = (uint64_t)after.tv_sec * 1000000000ull + (uint64_t)after.tv_nsec;

		CHECK_EQ_INT(fp_collector_cut(c2, 7, hi + 1000, &iv), 0);
		CHECK(iv.fi_start_ns >= lo && iv.fi_start_ns <= hi);
		CHECK_EQ_INT(iv.fi_ncounts, 0);
		fp_interval_fini(&iv);
		fp_collector_free(c2);
	}
	fp_collector_free(c);
	fp_collector_free(NULL);
}

/* check_mapping: peer mapping m is (kind, build-ID, path). */
static void check_mapping(const struct peer *p, uint32_t m, uint8_t kind,
			  const struct fp_build_id *id, const char *path)
{
	CHECK(m < PEER_MAPS && p->maps[m].defined);
	if (m >= PEER_MAPS || !p->maps[m].defined)
		return;
	CHECK_EQ_INT(p->maps[m].kind, kind);
	CHECK(fp_build_id_eq(&p->maps[m].id, id));
	if (strcmp(p->maps[m].path, path) != 0) {
		fprintf(stderr, "  mapping %u: path \"%s\", expected \"%s\"\n", m, p->maps[m].path,
			path);
		CHECK(!"mapping path");
	}
}

static void test_batch_definitions(void)
{
	struct fp_interval iv;
	struct fp_collector *c = collect_abc(&iv);
	struct peer *p = peer_new();
	struct fp_build_id madeup = { 20 };
	struct fp_frame fa[FP_MAX_FRAMES], fb[FP_MAX_FRAMES];
	const struct fp_count *a, *b, *cc;
	struct fp_batch bt;

	memcpy(madeup.fb_data, madeup_id, 20);
	if (!c || !p)
		goto out;
	a = count_with(&iv, 5);
	b = count_with(&iv, 3);
	cc = count_with(&iv, 2);
	if (!a || !b || !cc) {
		CHECK(!"counts 5, 3 and 2");
		goto out;
	}
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 0xfeed, 10000000, &bt), 0);
	CHECK(bt.fb_session == 0xfeed);
	CHECK_EQ_INT(bt.fb_seq, 1);
	CHECK_EQ_INT(bt.fb_start_ns, 1000);
	CHECK_EQ_INT(bt.fb_end_ns, 2000);
	CHECK_EQ_INT(bt.fb_period_ns, 10000000);
	CHECK_EQ_INT(bt.fb_ncounts, 3);
	CHECK(bt.fb_counts == iv.fi_counts); /* borrowed */
	/* Each definition once: 2 threads; 4 mappings (vmlinux, foo, the
	 * made-up build-ID, this binary); A's 6 nodes (shared with C) and B's
	 * 3 (B shares no outermost frame with A). */
	CHECK_EQ_INT(bt.fb_nthreads, 2);
	CHECK_EQ_INT(bt.fb_nmappings, 4);
	CHECK_EQ_INT(bt.fb_nnodes, 9);
	/* By frame: A's vmlinux, module, unmapped and three user frames; B's
	 * vmlinux and two user frames. */
	struct fp_collector_nodes kinds;
	fp_collector_nodes(c, &kinds);
	CHECK(kinds.cn_kernel == 3 && kinds.cn_user == 5 && kinds.cn_unmapped == 1 &&
	      kinds.cn_python == 0);
	peer_take(p, &bt);
	check_peer_clean(p);

	/* Stack A, frame by frame, leaf first. */
	CHECK_EQ_INT(peer_stack(p, a->fc_node, fa), 6); /* the empty user frame is dropped */
	if (peer_stack(p, a->fc_node, fa) == 6) {
		/* vmlinux: offset from _text */
		check_mapping(p, fa[0].ff_mapping, FP_MAP_KERNEL, &kern.kn_build_id, "vmlinux");
		CHECK(fa[0].ff_offset == 0x234567);
		/* module: offset from its base */
		check_mapping(p, fa[1].ff_mapping, FP_MAP_KMODULE, &modules[0].km_build_id, "foo");
		CHECK(fa[1].ff_offset == 0x123);
		/* below _text, in no module: unmapped, raw address */
		CHECK_EQ_INT(fa[2].ff_mapping, FP_MAPPING_NONE);
		CHECK(fa[2].ff_offset == 0xffffffff80000000ull);
		/* made-up build-ID: no process maps it, so no path */
		check_mapping(p, fa[3].ff_mapping, FP_MAP_USER, &madeup, "");
		CHECK(fa[3].ff_offset == 0x1234);
		/* by IP: this binary, its build-ID, the file offset */
		check_mapping(p, fa[4].ff_mapping, FP_MAP_USER, &exe_id, exe);
		CHECK(fa[4].ff_offset == file_offset(ip_a));
		CHECK(fa[4].ff_offset != UINT64_MAX);
		/* the same made-up mapping again */
		CHECK_EQ_INT(fa[5].ff_mapping, fa[3].ff_mapping);
		CHECK(fa[5].ff_offset == 0x5678);
		CHECK(fa[0].ff_mapping != fa[1].ff_mapping && fa[3].ff_mapping != fa[4].ff_mapping);
	}
	/* Stack B: A's thread and mappings. */
	CHECK_EQ_INT(peer_stack(p, b->fc_node, fb), 3);
	if (peer_stack(p, b->fc_node, fb) == 3 && peer_stack(p, a->fc_node, fa) == 6) {
		CHECK_EQ_INT(fb[0].ff_mapping, fa[0].ff_mapping);
		CHECK(fb[0].ff_offset == 0x1000);
		CHECK_EQ_INT(fb[1].ff_mapping, fa[4].ff_mapping);
		CHECK(fb[1].ff_offset == file_offset(ip_b));
		CHECK_EQ_INT(fb[2].ff_mapping, fa[3].ff_mapping);
		CHECK(fb[2].ff_offset == 0x1234);
	}
	/* The threads. */
	const struct fp_count *counts[] = { a, b, cc };
	for (int i = 0; i < 3; i++) {
		uint32_t tid = counts[i]->fc_thread;
		if (tid >= PEER_THREADS || !p->threads[tid].defined)
			continue;
		const struct fp_thread *t = &p->threads[tid].t;
		int is_c = i == 2;
		CHECK_EQ_INT(t->ft_id, tid);
		CHECK_EQ_INT(t->ft_pid, getpid());
		CHECK_EQ_INT(t->ft_tid, getpid() + (is_c ? 1 : 2));
		CHECK(t->ft_cgroup == 0x1234);
		CHECK(!strcmp(t->ft_comm, is_c ? "worker-2" : "worker-1"));
		CHECK(!strcmp(t->ft_process, self_comm)); /* from /proc/self/comm */
		CHECK(!strcmp(p->threads[tid].container, self_container));
	}
	fp_collector_batch_release(c, &bt);
	CHECK(bt.fb_nodes == NULL && bt.fb_nnodes == 0 && bt.fb_mappings == NULL);
out:
	fp_interval_fini(&iv);
	free(p);
	fp_collector_free(c);
}

static void test_sent_then_counts_only(void)
{
	struct fp_interval iv;
	struct fp_collector *c = collect_abc(&iv);
	struct peer *p = peer_new();
	struct fp_frame f[FP_MAX_FRAMES];
	struct fp_batch b;

	if (!c || !p)
		goto out;
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	peer_take(p, &b);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* A new interval with the same stacks: counts only. */
	add(c, &sa, 1);
	add(c, &sc, 6);
	CHECK_EQ_INT(fp_collector_cut(c, 2, 3000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nmappings, 0);
	CHECK_EQ_INT(b.fb_nthreads, 0);
	CHECK_EQ_INT(b.fb_nnodes, 0);
	CHECK_EQ_INT(b.fb_ncounts, 2);
	CHECK_EQ_INT(b.fb_seq, 2);
	peer_take(p, &b);
	check_peer_clean(p);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* A new innermost user frame under A's callers: the nodes from there
	 * to the leaf (that frame and A's 3 kernel frames above it), nothing
	 * else. */
	struct sample d = sa;
	d.u[0] = valid_frame(madeup_id, 0x9999);
	add(c, &d, 1);
	add(c, &sa, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 3, 4000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 4);
	CHECK_EQ_INT(b.fb_nthreads, 0);
	CHECK_EQ_INT(b.fb_nmappings, 0);
	CHECK_EQ_INT(b.fb_ncounts, 2);
	peer_take(p, &b);
	check_peer_clean(p);
	/* d's stack: its own innermost user frame under A's outer ones. */
	int found = 0;
	for (size_t i = 0; i < iv.fi_ncounts; i++) {
		if (peer_stack(p, iv.fi_counts[i].fc_node, f) != 6 || f[3].ff_offset != 0x9999)
			continue;
		found++;
		CHECK(f[0].ff_offset == 0x234567 && f[1].ff_offset == 0x123);
		CHECK(f[4].ff_offset == file_offset(ip_a) && f[5].ff_offset == 0x5678);
	}
	CHECK_EQ_INT(found, 1);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* A known stack on a new thread: the thread only. */
	struct sample e = sa;
	e.hdr.tid = (uint32_t)getpid() + 7;
	add(c, &e, 2);
	CHECK_EQ_INT(fp_collector_cut(c, 4, 5000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 0);
	CHECK_EQ_INT(b.fb_nthreads, 1);
	CHECK_EQ_INT(b.fb_nmappings, 0);
	if (b.fb_nthreads == 1)
		CHECK_EQ_INT(b.fb_threads[0].ft_tid, getpid() + 7);
	peer_take(p, &b);
	check_peer_clean(p);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* A module frame as B's leaf: one node; foo is known already. */
	struct sample g = sb;
	g.k[0] = MODBASE + 0x777;
	add(c, &g, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 5, 6000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 1);
	CHECK_EQ_INT(b.fb_nthreads, 0);
	CHECK_EQ_INT(b.fb_nmappings, 0);
	if (b.fb_nnodes == 1) {
		CHECK(b.fb_nodes[0].fn_frame.ff_offset == 0x777);
		CHECK(b.fb_nodes[0].fn_parent != FP_NODE_NONE);
	}
	peer_take(p, &b);
	check_peer_clean(p);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	free(p);
	fp_collector_free(c);
}

static void test_release_without_sent(void)
{
	struct fp_interval iv;
	struct fp_collector *c = collect_abc(&iv);
	struct peer *p = peer_new();
	struct fp_batch b;

	if (!c || !p)
		goto out;
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 9);
	fp_collector_batch_release(c, &b); /* the send failed */

	/* The same interval again (the agent retries it): all definitions. */
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 9);
	CHECK_EQ_INT(b.fb_nthreads, 2);
	CHECK_EQ_INT(b.fb_nmappings, 4);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* Or the next interval, with only A's thread: A's and B's nodes. */
	add(c, &sa, 1);
	add(c, &sb, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 2, 3000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 9);
	CHECK_EQ_INT(b.fb_nthreads, 1);
	CHECK_EQ_INT(b.fb_nmappings, 4);
	peer_take(p, &b);
	check_peer_clean(p);
	/* This one goes through. */
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* Only C's thread is still unsent. */
	add(c, &sa, 1);
	add(c, &sc, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 3, 4000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 0);
	CHECK_EQ_INT(b.fb_nthreads, 1);
	CHECK_EQ_INT(b.fb_nmappings, 0);
	if (b.fb_nthreads == 1)
		CHECK_EQ_INT(b.fb_threads[0].ft_tid, getpid() + 1);
	peer_take(p, &b);
	check_peer_clean(p);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	free(p);
	fp_collector_free(c);
}

static void test_forget(void)
{
	struct fp_interval iv;
	struct fp_collector *c = collect_abc(&iv);
	struct peer *p = peer_new();
	struct fp_batch b;

	if (!c || !p)
		goto out;
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	peer_take(p, &b);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* The peer lost its session: everything is sent again, once. */
	fp_collector_forget(c);
	peer_forget(p);
	add(c, &sa, 1);
	add(c, &sb, 1);
	add(c, &sc, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 2, 3000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 2, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 9);
	CHECK_EQ_INT(b.fb_nthreads, 2);
	CHECK_EQ_INT(b.fb_nmappings, 4);
	peer_take(p, &b);
	check_peer_clean(p);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* Forgetting after a batch was built: the same interval's next batch
	 * carries the definitions again. */
	add(c, &sa, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 3, 4000, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 2, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 0);
	fp_collector_batch_release(c, &b);
	fp_collector_forget(c);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 3, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 6);
	CHECK_EQ_INT(b.fb_nthreads, 1);
	CHECK_EQ_INT(b.fb_nmappings, 4);

	/* Forgetting while that batch is in flight: its late acknowledgement
	 * (from the old session) does not mark anything known. */
	fp_collector_forget(c);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 3, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 6);
	CHECK_EQ_INT(b.fb_nthreads, 1);
	CHECK_EQ_INT(b.fb_nmappings, 4);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	free(p);
	fp_collector_free(c);
}

static void test_thread_names(void)
{
	struct fp_collector *c = new_collector();
	struct peer *p = peer_new();
	struct fp_interval iv;
	struct fp_batch b;
	struct sample s, gone;
	uint32_t pid = (uint32_t)getpid(), dead = pid_max() + 1;
	const uint64_t k[] = { KTEXT + 0x10 };
	const struct bpf_stack_build_id u[] = { ip_frame((uint64_t)(uintptr_t)&probe_a) };

	if (!c || !p)
		goto out;
	/* A 16-character comm without a NUL, as BPF never sends but a
	 * hostile or buggy producer might. */
	make_sample(&s, pid, pid + 3, "0123456789abcdef", k, 1, u, 1);
	/* A process that is gone: no /proc entry. */
	make_sample(&gone, dead, dead, "shortlived", k, 1, u, 1);
	add(c, &s, 1);
	add(c, &gone, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nthreads, 2);
	CHECK_EQ_INT(b.fb_ncounts, 2);
	peer_take(p, &b);
	check_peer_clean(p);
	for (size_t i = 0; i < b.fb_nthreads; i++) {
		const struct fp_thread *t = &b.fb_threads[i];
		if (t->ft_pid == pid) {
			CHECK(!strcmp(t->ft_comm, "0123456789abcde"));
			CHECK(!strcmp(t->ft_process, self_comm));
			CHECK(t->ft_container && !strcmp(t->ft_container, self_container));
		} else {
			CHECK_EQ_INT(t->ft_pid, dead);
			/* No /proc/PID/comm: the thread's own name stands in. */
			CHECK(!strcmp(t->ft_process, "shortlived"));
			CHECK(t->ft_container && !strcmp(t->ft_container, ""));
		}
	}
	/* The user frame: in this binary for us; unmapped, as a raw address,
	 * for the process that is gone. */
	int checked = 0;
	for (size_t i = 0; i < iv.fi_ncounts; i++) {
		struct fp_frame f[FP_MAX_FRAMES];
		uint32_t t = iv.fi_counts[i].fc_thread;
		if (t >= PEER_THREADS || peer_stack(p, iv.fi_counts[i].fc_node, f) != 2) {
			CHECK(!"two frames");
			continue;
		}
		if (p->threads[t].t.ft_pid == pid) {
			CHECK(f[1].ff_mapping != FP_MAPPING_NONE);
			CHECK(f[1].ff_offset == file_offset((uintptr_t)&probe_a));
			checked++;
		} else if (p->threads[t].t.ft_pid == dead) {
			CHECK_EQ_INT(f[1].ff_mapping, FP_MAPPING_NONE);
			CHECK(f[1].ff_offset == (uint64_t)(uintptr_t)&probe_a);
			checked++;
		}
	}
	CHECK_EQ_INT(checked, 2);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	free(p);
	fp_collector_free(c);
}

/* A process named before an exec (a shell script that execs python3)
 * is named after it from the first sample that shows its new name: its
 * main thread's, then its other threads too. */
static void test_name_after_exec(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct fp_batch b;
	struct sample before, after, worker;
	const uint64_t k[] = { KTEXT + 0x10 };
	int go[2] = { -1, -1 }, execd = 0;
	pid_t child = -1;
	char name[FP_COMM_LEN + 1], path[64];

	if (!c || pipe(go))
		goto out;
	if ((child = fork()) == 0) {
		char x;
		close(go[1]);
		if (read(go[0], &x, 1) == 1)
			execlp("sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	close(go[0]);
	if (child < 0)
		goto out;
	make_sample(&before, (uint32_t)child, (uint32_t)child, self_comm, k, 1, NULL, 0);
	add(c, &before, 1); /* /proc/CHILD/comm: still ours */
	if (write(go[1], "g", 1) != 1)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)child);
	for (int i = 0; i < 500 && !execd; i++) { /* up to 5 s */
		FILE *f = fopen(path, "re");
		execd = f && fgets(name, sizeof(name), f) && !strcmp(name, "sleep\n");
		if (f)
			fclose(f);
		if (!execd)
			usleep(10000);
	}
	CHECK(execd);
	make_sample(&after, (uint32_t)child, (uint32_t)child, "sleep", k, 1, NULL, 0);
	make_sample(&worker, (uint32_t)child, (uint32_t)child + 1, "worker", k, 1, NULL, 0);
	add(c, &after, 1);
	add(c, &worker, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nthreads, 3);
	for (size_t i = 0; i < b.fb_nthreads; i++) {
		const struct fp_thread *t = &b.fb_threads[i];
		if (!strcmp(t->ft_comm, "sleep") || !strcmp(t->ft_comm, "worker"))
			CHECK(!strcmp(t->ft_process, "sleep"));
		else
			CHECK(!strcmp(t->ft_process, self_comm));
	}
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	if (go[1] >= 0)
		close(go[1]);
	fp_collector_free(c);
}

/* Off-CPU: a thread's stacks at its switch out wait for its return, which
 * brings the time away; each wait counts 1/q (q in 65536ths), apart from
 * the CPU samples of the same stack.  A return that is not of the noted
 * wait, or with no wait noted, counts nothing. */
static void test_offcpu_join(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct sample cpu, out, done;
	uint32_t pid = (uint32_t)getpid(), tid = pid + 5;
	const uint64_t k[] = { KTEXT + 0x40 };
	size_t i, noff = 0, ncpu = 0;

	if (!c)
		return;
	make_sample(&cpu, pid, tid, "waiter", k, 1, NULL, 0);
	add(c, &cpu, 1);
	/* a wait taken with q = 1/2: it stands for two of 3 ms */
	make_sample(&out, pid, tid, "waiter", k, 1, NULL, 0);
	out.hdr.flags = FP_SAMPLE_OFFCPU, out.hdr.pad = 32768, out.hdr.off_start = 1000;
	add(c, &out, 1);
	memset(&done, 0, sizeof(done));
	done.hdr.pid = pid, done.hdr.tid = tid, done.hdr.flags = FP_SAMPLE_OFFCPU_DONE;
	done.hdr.pad = 32768, done.hdr.off_start = 1000, done.hdr.off_ns = 3000000;
	add(c, &done, 1);
	add(c, &done, 1); /* again: that wait is counted already */
	/* the next wait, taken always: 5 ms, after a return of another */
	out.hdr.pad = 65536, out.hdr.off_start = 2000;
	add(c, &out, 1);
	done.hdr.pad = 65536, done.hdr.off_start = 1999, done.hdr.off_ns = 7000000;
	add(c, &done, 1);
	done.hdr.off_start = 2000, done.hdr.off_ns = 5000000;
	add(c, &done, 1);
	/* a return of a thread with no wait noted */
	done.hdr.tid = tid + 1;
	add(c, &done, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 2);
	CHECK(iv.fi_samples == 1);
	CHECK(iv.fi_offcpu_ns == 11000000);
	for (i = 0; i < iv.fi_ncounts; i++) {
		const struct fp_count *n = &iv.fi_counts[i];
		if (n->fc_off_ns) {
			noff++;
			CHECK(n->fc_off_ns == 11000000);
			CHECK_EQ_INT(n->fc_count, 3);
		} else {
			ncpu++;
			CHECK_EQ_INT(n->fc_count, 1);
		}
	}
	CHECK(noff == 1 && ncpu == 1);
	/* the same stack: one leaf node for both */
	if (iv.fi_ncounts == 2) {
		CHECK_EQ_INT(iv.fi_counts[0].fc_node, iv.fi_counts[1].fc_node);
		CHECK_EQ_INT(iv.fi_counts[0].fc_thread, iv.fi_counts[1].fc_thread);
	}
	fp_interval_fini(&iv);
	/* Nothing left over for the next interval. */
	CHECK_EQ_INT(fp_collector_cut(c, 2, 2, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 0);
	CHECK(iv.fi_offcpu_ns == 0);
	fp_interval_fini(&iv);
	fp_collector_free(c);
}

/* offcpu_wait: a wait of thread tid with kernel stack k, taken with q
 * (65536ths) at start, d ns long, the thread away away_ns since its last
 * completed wait: its two records. */
static void offcpu_wait(struct fp_collector *c, uint32_t pid, uint32_t tid, const uint64_t *k,
			uint32_t q, uint64_t start, uint64_t d, uint64_t away_ns)
{
	struct sample out, done;

	make_sample(&out, pid, tid, "t", k, 1, NULL, 0);
	out.hdr.flags = FP_SAMPLE_OFFCPU, out.hdr.pad = q, out.hdr.off_start = start;
	add(c, &out, 1);
	memset(&done, 0, sizeof(done));
	done.hdr.pid = pid, done.hdr.tid = tid, done.hdr.flags = FP_SAMPLE_OFFCPU_DONE;
	done.hdr.pad = q, done.hdr.off_start = start, done.hdr.off_ns = d;
	done.hdr.off_away_ns = away_ns;
	add(c, &done, 1);
}

/* A thread's off-CPU time is what the program measured of all its waits
 * (off_away_ns, brought by each completed wait): its stacks' weights
 * only share it out. */
static void test_offcpu_exact_total(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	uint32_t pid = (uint32_t)getpid(), tid = pid + 9;
	const uint64_t kx[] = { KTEXT + 0x100 }, ky[] = { KTEXT + 0x200 };
	uint64_t x = 0, y = 0;

	if (!c)
		return;
	/* stack x, taken always: 1 ms, and 4 ms of waits not taken before it */
	offcpu_wait(c, pid, tid, kx, 65536, 10, 1000000, 5000000);
	/* stack y, taken with q 1/2: 1 ms weighs 2; 2 ms before it */
	offcpu_wait(c, pid, tid, ky, 32768, 20, 1000000, 3000000);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 2);
	/* weighed 1 and 2 ms; measured 8 ms in all: 8/3 and 16/3 ms */
	for (size_t i = 0; i < iv.fi_ncounts; i++) {
		if (iv.fi_counts[i].fc_count == 1)
			x = iv.fi_counts[i].fc_off_ns;
		else
			y = iv.fi_counts[i].fc_off_ns;
	}
	CHECK(x >= 2666666 && x <= 2666667);
	CHECK(y >= 5333333 && y <= 5333334);
	CHECK(iv.fi_offcpu_ns >= 7999999 && iv.fi_offcpu_ns <= 8000001);
	fp_interval_fini(&iv);
	fp_collector_free(c);
}

/* Frames that resolve to nothing, and a build-ID the process maps. */
static void test_unmapped_and_paths(void)
{
	struct fp_collector *c = new_collector();
	struct peer *p = peer_new();
	struct fp_frame f[FP_MAX_FRAMES];
	struct fp_interval iv;
	struct fp_batch b;
	struct sample s;
	uint32_t pid = (uint32_t)getpid(), exe_mapping = FP_MAPPING_NONE;
	long page = sysconf(_SC_PAGESIZE);
	/* Anonymous executable memory, as a JIT makes. */
	void *jit = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
	uint64_t jit_ip = (uint64_t)(uintptr_t)jit + 0x40;
	const uint64_t k[] = {
		KTEXT - 1,             /* just below _text */
		MODBASE + MODSIZE,     /* just past the module */
		MODBASE - 1,           /* just before it */
		KTEXT,                 /* _text itself */
		MODBASE + MODSIZE - 1, /* the module's last byte */
		0,                     /* end of the kernel stack */
		KTEXT + 0x5000,        /* not read */
	};
	struct bpf_stack_build_id u[3];

	CHECK(jit != MAP_FAILED);
	if (!c || !p || jit == MAP_FAILED)
		goto out;
	u[0] = ip_frame(jit_ip);
	u[1] = valid_frame(exe_id.fb_data, 0x4242); /* this binary, by build-ID */
	u[2] = ip_frame(0x10);                      /* in no mapping at all */
	make_sample(&s, pid, pid, "jit", k, 7, u, 3);
	add(c, &s, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 1);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	peer_take(p, &b);
	check_peer_clean(p);
	CHECK_EQ_INT(b.fb_nmappings, 3); /* vmlinux, foo, this binary */
	CHECK_EQ_INT(b.fb_nnodes, 8);
	if (iv.fi_ncounts == 1 && peer_stack(p, iv.fi_counts[0].fc_node, f) == 8) {
		CHECK_EQ_INT(f[0].ff_mapping, FP_MAPPING_NONE);
		CHECK(f[0].ff_offset == KTEXT - 1);
		/* _text itself: vmlinux, offset 0; the module's last byte. */
		check_mapping(p, f[3].ff_mapping, FP_MAP_KERNEL, &kern.kn_build_id, "vmlinux");
		CHECK(f[3].ff_offset == 0);
		check_mapping(p, f[4].ff_mapping, FP_MAP_KMODULE, &modules[0].km_build_id, "foo");
		CHECK(f[4].ff_offset == MODSIZE - 1);
		/* Just outside the module: not the module; either vmlinux
		 * (offset from _text) or unmapped (raw address). */
		for (int j = 1; j <= 2; j++) {
			CHECK(f[j].ff_mapping != f[4].ff_mapping);
			if (f[j].ff_mapping == FP_MAPPING_NONE)
				CHECK(f[j].ff_offset == k[j]);
			else
				CHECK(f[j].ff_mapping == f[3].ff_mapping &&
				      f[j].ff_offset == k[j] - KTEXT);
		}
		/* JIT code: raw address. */
		CHECK_EQ_INT(f[5].ff_mapping, FP_MAPPING_NONE);
		CHECK(f[5].ff_offset == jit_ip);
		/* Our build-ID: found in our maps, with our path. */
		check_mapping(p, f[6].ff_mapping, FP_MAP_USER, &exe_id, exe);
		CHECK(f[6].ff_offset == 0x4242);
		exe_mapping = f[6].ff_mapping;
		/* In no mapping: raw. */
		CHECK_EQ_INT(f[7].ff_mapping, FP_MAPPING_NONE);
		CHECK(f[7].ff_offset == 0x10);
	} else {
		CHECK(!"one stack of 8 frames");
	}
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);

	/* The same binary reached by IP is the same mapping as by build-ID:
	 * one new node, nothing else. */
	const struct bpf_stack_build_id u2[] = { ip_frame((uint64_t)(uintptr_t)&probe_b) };
	make_sample(&s, pid, pid, "jit", NULL, 0, u2, 1);
	add(c, &s, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 2, 2, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 1);
	CHECK_EQ_INT(b.fb_nthreads, 0);
	CHECK_EQ_INT(b.fb_nmappings, 0);
	if (b.fb_nnodes == 1) {
		CHECK(exe_mapping != FP_MAPPING_NONE);
		CHECK_EQ_INT(b.fb_nodes[0].fn_frame.ff_mapping, exe_mapping);
		CHECK(b.fb_nodes[0].fn_frame.ff_offset == file_offset((uintptr_t)&probe_b));
		CHECK_EQ_INT(b.fb_nodes[0].fn_parent, FP_NODE_NONE);
	}
	peer_take(p, &b);
	check_peer_clean(p);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	if (jit != MAP_FAILED)
		munmap(jit, (size_t)page);
	free(p);
	fp_collector_free(c);
}

/* A mapping that appears after the process's maps were read is found
 * once the maps are read again (in a later interval at the latest). */
static void test_new_mapping(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct fp_batch b;
	struct sample s;
	uint32_t pid = (uint32_t)getpid();
	long page = sysconf(_SC_PAGESIZE);
	const struct bpf_stack_build_id u0[] = { ip_frame((uint64_t)(uintptr_t)&probe_a) };
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	void *m = MAP_FAILED;

	if (!c || fd < 0)
		goto out;
	make_sample(&s, pid, pid, "t", NULL, 0, u0, 1);
	add(c, &s, 1); /* reads our maps */
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	fp_interval_fini(&iv);

	/* Map the test binary's second page again, executable. */
	m = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, page);
	CHECK(m != MAP_FAILED);
	if (m == MAP_FAILED)
		goto out;
	uint64_t ip = (uint64_t)(uintptr_t)m + 0x10;
	const struct bpf_stack_build_id u1[] = { ip_frame(ip) };
	make_sample(&s, pid, pid, "t", NULL, 0, u1, 1);
	add(c, &s, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 2, 2, &iv), 0);
	fp_interval_fini(&iv);
	add(c, &s, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 3, 3, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 1);
	if (b.fb_nnodes == 1) {
		const struct fp_frame *f = &b.fb_nodes[0].fn_frame;
		CHECK(f->ff_mapping != FP_MAPPING_NONE);
		CHECK(f->ff_offset == (uint64_t)page + 0x10); /* file offset */
		for (size_t i = 0; i < b.fb_nmappings; i++)
			if (b.fb_mappings[i].fm_id == f->ff_mapping)
				CHECK(!strcmp(b.fb_mappings[i].fm_path, exe));
	}
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	if (m != MAP_FAILED)
		munmap(m, (size_t)page);
	if (fd >= 0)
		close(fd);
	fp_collector_free(c);
}

/* A file mapped after the process's mappings were read in this interval
 * (as a program an exec brings), sampled by build-ID: the mappings are
 * read again for it, so that its path is known and the file opens when
 * the symbolizer asks for it (its path was "" and the open ENOENT, and
 * the symbolizer asked again only after a minute). */
static void test_file_mapped_this_interval(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct fp_batch b;
	struct fp_build_id id;
	struct sample s;
	uint32_t pid = (uint32_t)getpid();
	const char *path = "/usr/bin/true";
	long page = sysconf(_SC_PAGESIZE);
	const struct bpf_stack_build_id u0[] = { ip_frame((uint64_t)(uintptr_t)&probe_a) };
	int fd = open(path, O_RDONLY | O_CLOEXEC), file, found = 0;
	void *m = MAP_FAILED;

	CHECK(fd >= 0 && fp_elfnote_build_id(fd, &id) == 0);
	if (!c || fd < 0)
		goto out;
	make_sample(&s, pid, pid, "t", NULL, 0, u0, 1);
	add(c, &s, 1); /* reads our maps, in this interval */
	m = mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED);
	if (m == MAP_FAILED)
		goto out;
	const struct bpf_stack_build_id u1[] = { valid_frame(id.fb_data, 0x10) };
	make_sample(&s, pid, pid, "t", NULL, 0, u1, 1);
	add(c, &s, 1);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	for (size_t i = 0; i < b.fb_nmappings; i++)
		if (fp_build_id_eq(&b.fb_mappings[i].fm_build_id, &id)) {
			CHECK(!strcmp(b.fb_mappings[i].fm_path, path));
			found = 1;
		}
	CHECK(found);
	file = fp_collector_open_file(c, &id);
	CHECK(file >= 0);
	if (file >= 0)
		close(file);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	if (m != MAP_FAILED)
		munmap(m, (size_t)page);
	if (fd >= 0)
		close(fd);
	fp_collector_free(c);
}

/* Raw user addresses (processes whose mappings the agent holds) resolve
 * exactly as the kernel's BPF_STACK_BUILD_ID_IP frames do. */
static void test_raw_user_addresses(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct sample s, raw;
	uint32_t pid = (uint32_t)getpid();
	const uint64_t k[] = { KTEXT + 0x42 };
	const struct bpf_stack_build_id u[] = { ip_frame(ip_b), ip_frame(ip_a) };
	const uint64_t ips[] = { ip_b, ip_a };

	if (!c)
		return;
	make_sample(&s, pid, pid, "raw", k, 1, u, 2);
	make_sample(&raw, pid, pid, "raw", k, 1, NULL, 0);
	memcpy(raw.u, ips, sizeof(ips));
	raw.hdr.ustack_bytes = sizeof(ips);
	raw.hdr.flags = FP_SAMPLE_USER_RAW;
	add(c, &s, 1);
	add(c, &raw, 2);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 1); /* the same thread and stack */
	if (iv.fi_ncounts == 1)
		CHECK_EQ_INT(iv.fi_counts[0].fc_count, 3);
	fp_interval_fini(&iv);
	fp_collector_free(c);
}

/* The hook that keeps the sampler's known_pids in step. */
struct known_log {
	int calls;
	uint32_t pid[16];
	int known[16];
};

static void on_known(uint32_t pid, int known, void *arg)
{
	struct known_log *l = arg;

	if (l->calls < 16) {
		l->pid[l->calls] = pid;
		l->known[l->calls] = known;
	}
	l->calls++;
}

static void test_known_hook(void)
{
	struct fp_collector *c = new_collector();
	struct known_log log;
	struct fp_interval iv;
	struct sample s, miss, gone;
	uint32_t pid = (uint32_t)getpid(), dead = pid_max() + 1;
	const struct bpf_stack_build_id u[] = { ip_frame(ip_a) };
	const uint64_t nowhere = 0x10;

	if (!c)
		return;
	memset(&log, 0, sizeof(log));
	fp_collector_set_known_fn(c, on_known, &log);
	make_sample(&s, pid, pid, "k", NULL, 0, u, 1);
	make_sample(&gone, dead, dead, "k", NULL, 0, u, 1);
	/* A build-ID sample: the mappings are read, the pid becomes known. */
	add(c, &s, 1);
	CHECK_EQ_INT(log.calls, 1);
	CHECK(log.pid[0] == pid && log.known[0] == 1);
	add(c, &s, 3); /* already known: no more calls */
	CHECK_EQ_INT(log.calls, 1);
	/* A process whose mappings cannot be read never becomes known. */
	add(c, &gone, 1);
	CHECK_EQ_INT(log.calls, 1);
	/* A raw address in none of its mappings: unknown again, so that the
	 * kernel names the frames until the maps are read again. */
	make_sample(&miss, pid, pid, "k", NULL, 0, NULL, 0);
	memcpy(miss.u, &nowhere, sizeof(nowhere));
	miss.hdr.ustack_bytes = sizeof(nowhere);
	miss.hdr.flags = FP_SAMPLE_USER_RAW;
	add(c, &miss, 1);
	CHECK_EQ_INT(log.calls, 2);
	CHECK(log.pid[1] == pid && log.known[1] == 0);
	add(c, &s, 1); /* and known once more */
	CHECK_EQ_INT(log.calls, 3);
	CHECK(log.pid[2] == pid && log.known[2] == 1);
	/* Cached process state is dropped every few cuts: all forgotten. */
	int cuts = 0;
	while (log.calls == 3 && cuts < 20) {
		CHECK_EQ_INT(fp_collector_cut(c, (uint64_t)cuts, 1, &iv), 0);
		fp_interval_fini(&iv);
		cuts++;
	}
	CHECK(cuts > 1 && cuts < 20);
	CHECK_EQ_INT(log.calls, 4);
	CHECK(log.pid[3] == 0 && log.known[3] == 0);
	/* Freeing the collector does not call the hook (the sampler may be
	 * gone). */
	fp_collector_free(c);
	CHECK_EQ_INT(log.calls, 4);
}

/* A collector that never saw a sample: cuts (including the ones that drop
 * cached process state), forget, empty batches and free. */
static void test_idle(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct fp_batch b;

	if (!c)
		return;
	fp_collector_forget(c);
	for (uint64_t i = 1; i <= 13; i++) {
		CHECK_EQ_INT(fp_collector_cut(c, i, i * 10, &iv), 0);
		CHECK_EQ_INT(iv.fi_ncounts, 0);
		CHECK(iv.fi_counts == NULL);
		CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
		CHECK_EQ_INT(b.fb_ncounts + b.fb_nnodes + b.fb_nthreads + b.fb_nmappings, 0);
		CHECK_EQ_INT(b.fb_seq, i);
		fp_collector_sent(c, &b);
		fp_collector_batch_release(c, &b);
		fp_interval_fini(&iv);
	}
	fp_collector_forget(c);
	fp_collector_free(c);

	/* Freed without a single cut. */
	c = new_collector();
	fp_collector_free(c);
}

/* Process state is dropped every few cuts and read again: resolution
 * carries on, with the same ids. */
static void test_many_cuts(void)
{
	struct fp_collector *c = new_collector();
	struct fp_interval iv;
	struct fp_batch b;
	struct fp_count first = { UINT32_MAX, UINT32_MAX, 0 };

	if (!c)
		return;
	for (uint64_t i = 1; i <= 20; i++) {
		add(c, &sa, 1);
		CHECK_EQ_INT(fp_collector_cut(c, i, i, &iv), 0);
		CHECK_EQ_INT(iv.fi_ncounts, 1);
		if (iv.fi_ncounts != 1) {
			fp_interval_fini(&iv);
			break;
		}
		if (first.fc_node == UINT32_MAX)
			first = iv.fi_counts[0];
		CHECK_EQ_INT(iv.fi_counts[0].fc_node, first.fc_node);
		CHECK_EQ_INT(iv.fi_counts[0].fc_thread, first.fc_thread);
		CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
		CHECK_EQ_INT(b.fb_nnodes, i == 1 ? 6 : 0);
		fp_collector_sent(c, &b);
		fp_collector_batch_release(c, &b);
		fp_interval_fini(&iv);
	}
	fp_collector_free(c);
}

static void test_full_depth(void)
{
	struct fp_collector *c = new_collector();
	struct peer *p = peer_new();
	struct sample *s = calloc(1, sizeof(*s));
	uint64_t k[FP_STACK_DEPTH];
	struct bpf_stack_build_id u[FP_STACK_DEPTH + 3];
	struct fp_frame f[FP_MAX_FRAMES];
	struct fp_interval iv;
	struct fp_batch b;

	if (!c || !s || !p)
		goto out;
	for (int i = 0; i < FP_STACK_DEPTH; i++)
		k[i] = KTEXT + 0x100 * (uint64_t)(i + 1);
	for (int i = 0; i < FP_STACK_DEPTH + 3; i++)
		u[i] = valid_frame(madeup_id, 0x10 * (uint64_t)(i + 1));
	/* More user frames than fit: the stack stops at FP_MAX_FRAMES. */
	make_sample(s, (uint32_t)getpid(), 1, "deep", k, FP_STACK_DEPTH, u, FP_STACK_DEPTH + 3);
	add(c, s, 2);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, 1);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, FP_MAX_FRAMES);
	CHECK_EQ_INT(b.fb_nmappings, 2);
	peer_take(p, &b);
	check_peer_clean(p);
	if (iv.fi_ncounts == 1 && peer_stack(p, iv.fi_counts[0].fc_node, f) == FP_MAX_FRAMES) {
		CHECK(f[0].ff_offset == 0x100);
		CHECK(f[FP_STACK_DEPTH - 1].ff_offset == 0x100 * FP_STACK_DEPTH);
		CHECK(f[FP_STACK_DEPTH].ff_offset == 0x10);
		CHECK(f[FP_MAX_FRAMES - 1].ff_offset ==
		      0x10 * (uint64_t)(FP_MAX_FRAMES - FP_STACK_DEPTH));
	} else {
		CHECK(!"a stack of FP_MAX_FRAMES frames");
	}
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
out:
	free(s);
	free(p);
	fp_collector_free(c);
}

static void test_many_stacks(void)
{
	enum { N = 2000 };
	struct fp_collector *c = new_collector();
	struct peer *p = peer_new();
	struct fp_interval iv;
	struct fp_batch b;
	struct sample s;
	size_t before, after;

	if (!c || !p)
		goto out;
	before = fp_collector_bytes(c);
	for (uint32_t i = 0; i < N; i++) {
		const uint64_t k[] = { KTEXT + i };
		const struct bpf_stack_build_id u[] = { valid_frame(madeup_id, i) };
		make_sample(&s, (uint32_t)getpid(), 5, "many", k, 1, u, 1);
		add(c, &s, (int)(i % 3) + 1);
	}
	after = fp_collector_bytes(c);
	CHECK(after > before);
	CHECK(after >= (size_t)N * 2 * sizeof(struct fp_frame));
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(iv.fi_ncounts, N);
	CHECK_EQ_INT(iv.fi_samples, (N / 3) * 6 + 1 + 2);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 1, &b), 0);
	CHECK_EQ_INT(b.fb_nnodes, 2 * N);
	CHECK_EQ_INT(b.fb_nthreads, 1);
	CHECK_EQ_INT(b.fb_nmappings, 2);
	peer_take(p, &b);
	check_peer_clean(p);
	/* Each stack's frames are its own sample's. */
	int bad = 0;
	for (size_t i = 0; i < iv.fi_ncounts; i++) {
		struct fp_frame f[FP_MAX_FRAMES];
		if (peer_stack(p, iv.fi_counts[i].fc_node, f) != 2) {
			bad++;
			continue;
		}
		uint64_t x = f[0].ff_offset;
		if (f[1].ff_offset != x || iv.fi_counts[i].fc_count != x % 3 + 1)
			bad++;
	}
	CHECK_EQ_INT(bad, 0);
	fp_collector_sent(c, &b);
	fp_collector_batch_release(c, &b);
	fp_interval_fini(&iv);
	/* Interning is not memory the cut gives back. */
	CHECK(fp_collector_bytes(c) >= after);
out:
	free(p);
	fp_collector_free(c);
}

/* A 3.11 location table: [0, 4) line 10, [4, 8) and [8, 12) line 11
 * (two entries, one run), [12, 14) no location; the code ends at 14. */
static const uint8_t py_table[] = { 0x81, 0x00, 0xd9, 0x01, 0x02, 0xd1, 0x01, 0x02, 0xf8 };

/* The pycode hook: the code object at 0x1000 has py_table, any other
 * cannot be read. */
static int fake_code(uint32_t pid, uint64_t addr, uint32_t tag, struct fp_pycode **code,
		     char **filename, void *arg)
{
	struct fp_pycode *c;

	(*(int *)arg)++;
	if (addr != 0x1000)
		return -EFAULT;
	if (!(c = calloc(1, sizeof(*c))) || !(c->pc_qualname = strdup("f")) ||
	    !(c->pc_linetable = malloc(sizeof(py_table)))) {
		fp_pycode_free(c);
		return -ENOMEM;
	}
	memcpy(c->pc_linetable, py_table, sizeof(py_table));
	c->pc_linetable_len = sizeof(py_table);
	c->pc_lines = FP_PY_LOCATIONS;
	c->pc_firstlineno = 10;
	*code = c;
	*filename = NULL;
	return 0;
}

/* One Python frame per sample, at each lasti: the stack trie gets a node
 * per line, at the line's first instruction, which the symbolizer puts on
 * the same line as lasti; offsets in no run (past the table, unknown, or
 * of a code object that could not be read) go as they came.  The code
 * object is read once. */
static void test_python_offsets_per_line(void)
{
	static const struct {
		uint64_t addr;
		uint32_t lasti, sent;
	} cases[] = {
		{ 0x1000, 0, 0 },
		{ 0x1000, 2, 0 },
		{ 0x1000, 4, 4 },
		{ 0x1000, 6, 4 },
		{ 0x1000, 11, 4 },
		{ 0x1000, 12, 12 },
		{ 0x1000, 14, 14 },
		{ 0x1000, 20, 20 },
		{ 0x1000, FP_PY_LASTI_NONE, FP_PY_LASTI_NONE },
		{ 0x2000, 2, 2 },
		{ 0x2000, 4, 4 },
	};
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	struct fp_collector *c = new_collector();
	struct peer *p = peer_new();
	uint32_t pid = (uint32_t)getpid(), leaf[16], read_map = FP_MAPPING_NONE;
	struct fp_interval iv;
	struct fp_batch bt;
	struct sample s;
	int reads = 0;

	if (!c || !p)
		goto out;
	fp_collector_set_pycode_fn(c, fake_code, &reads);
	for (size_t i = 0; i < n; i++) {
		uint64_t slots[2] = { FP_PY_SLOT_FRAME | (uint64_t)cases[i].lasti << 32 | 0x77,
				      cases[i].addr };
		make_sample(&s, pid, pid, "py", NULL, 0, NULL, 0);
		memcpy(s.u, slots, sizeof(slots));
		s.hdr.ustack_bytes = sizeof(slots);
		s.hdr.flags = FP_SAMPLE_USER_RAW;
		add(c, &s, 1);
	}
	CHECK_EQ_INT(reads, 2);
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 10000000, &bt), 0);
	peer_take(p, &bt);
	check_peer_clean(p);
	/* 0; 4; 12; 14; 20; unknown; and the unread code's 2 and 4. */
	CHECK_EQ_INT(bt.fb_nnodes, 8);
	struct fp_collector_nodes kinds;
	fp_collector_nodes(c, &kinds);
	CHECK(kinds.cn_python == 8 && kinds.cn_user == 0 && kinds.cn_kernel == 0 &&
	      kinds.cn_unmapped == 0);
	CHECK_EQ_INT(bt.fb_ncounts, 8);
	for (size_t i = 0; i < bt.fb_ncounts && i < 16; i++) {
		struct fp_frame f[FP_MAX_FRAMES];
		CHECK_EQ_INT(peer_stack(p, bt.fb_counts[i].fc_node, f), 1);
		leaf[i] = bt.fb_counts[i].fc_node;
		CHECK_EQ_INT(p->maps[f[0].ff_mapping].kind, FP_MAP_PYTHON);
		/* Only the code at 0x1000 has a node at offset 0. */
		if (f[0].ff_offset == 0)
			read_map = f[0].ff_mapping;
	}
	CHECK(read_map != FP_MAPPING_NONE);
	for (size_t i = 0; i < n; i++) {
		uint32_t sent = UINT32_MAX, count = 0;
		for (size_t j = 0; j < bt.fb_ncounts && j < 16; j++) {
			const struct fp_frame *f = &p->nodes[leaf[j]].frame;
			if (f->ff_offset != cases[i].sent ||
			    (f->ff_mapping == read_map) != (cases[i].addr == 0x1000))
				continue;
			sent = (uint32_t)f->ff_offset;
			count += bt.fb_counts[j].fc_count;
		}
		CHECK_EQ_INT(sent, cases[i].sent);
		if (cases[i].addr == 0x1000 && cases[i].lasti == 4)
			CHECK_EQ_INT(count, 3);
		if (cases[i].addr == 0x1000 && cases[i].lasti != FP_PY_LASTI_NONE)
			CHECK_EQ_INT(fp_pyline(FP_PY_LOCATIONS, py_table, sizeof(py_table), 10,
					       cases[i].sent),
				     fp_pyline(FP_PY_LOCATIONS, py_table, sizeof(py_table), 10,
					       cases[i].lasti));
	}
	fp_collector_batch_release(c, &bt);
	fp_interval_fini(&iv);
out:
	free(p);
	fp_collector_free(c);
}

/* The fold hook: this binary's offsets to a multiple of 16 (as if each
 * 16 bytes were a row), any other file left alone. */
struct fold_log {
	int calls;
	uint64_t offsets[8];
};

static int fold16(const struct fp_build_id *id, uint64_t offset, uint64_t *start, void *arg)
{
	struct fold_log *l = arg;

	if (l->calls < 8)
		l->offsets[l->calls] = offset;
	l->calls++;
	if (!fp_build_id_eq(id, &exe_id))
		return -ENOENT;
	*start = offset & ~0xfull;
	return 0;
}

/* Native frames below the innermost Python frame are folded by the hook;
 * those above it, and every frame of a stack without Python, are not. */
static void test_fold_below_python(void)
{
	struct fp_collector *c = new_collector();
	struct peer *p = peer_new();
	uint32_t pid = (uint32_t)getpid();
	struct fold_log log = { 0 };
	uint64_t a = ip_a + 0x31, b = ip_b + 0x42;
	uint64_t py[] = { a, b, FP_PY_SLOT_FRAME | 0x77, 0x1000, b };
	uint64_t native[] = { a, b };
	struct fp_frame f[FP_MAX_FRAMES];
	struct fp_collector_nodes kinds;
	struct fp_interval iv;
	struct fp_batch bt;
	struct sample s, t;
	int reads = 0, n;

	if (!c || !p)
		goto out;
	fp_collector_set_pycode_fn(c, fake_code, &reads);
	fp_collector_set_fold_fn(c, fold16, &log);
	make_sample(&s, pid, pid, "py", NULL, 0, NULL, 0);
	memcpy(s.u, py, sizeof(py));
	s.hdr.ustack_bytes = sizeof(py);
	s.hdr.flags = FP_SAMPLE_USER_RAW;
	make_sample(&t, pid, pid, "py", NULL, 0, NULL, 0);
	memcpy(t.u, native, sizeof(native));
	t.hdr.ustack_bytes = sizeof(native);
	t.hdr.flags = FP_SAMPLE_USER_RAW;
	add(c, &s, 1);
	add(c, &t, 1);
	CHECK_EQ_INT(log.calls, 2);
	CHECK(log.offsets[0] == file_offset(a) && log.offsets[1] == file_offset(b));
	CHECK_EQ_INT(fp_collector_cut(c, 1, 1, &iv), 0);
	CHECK_EQ_INT(fp_collector_batch(c, &iv, 1, 10000000, &bt), 0);
	peer_take(p, &bt);
	check_peer_clean(p);
	CHECK_EQ_INT(bt.fb_ncounts, 2);
	for (size_t i = 0; i < bt.fb_ncounts && i < 2; i++) {
		n = peer_stack(p, bt.fb_counts[i].fc_node, f);
		if (n == 4) { /* a, b, the Python frame, b */
			CHECK(f[0].ff_offset == (file_offset(a) & ~0xfull));
			CHECK(f[1].ff_offset == (file_offset(b) & ~0xfull));
			CHECK_EQ_INT(p->maps[f[2].ff_mapping].kind, FP_MAP_PYTHON);
			CHECK(f[3].ff_offset == file_offset(b));
		} else {
			CHECK_EQ_INT(n, 2);
			CHECK(f[0].ff_offset == file_offset(a) && f[1].ff_offset == file_offset(b));
		}
	}
	fp_collector_nodes(c, &kinds);
	CHECK_EQ_INT(kinds.cn_folded,
		     (file_offset(a) & 0xf ? 1 : 0) + (file_offset(b) & 0xf ? 1 : 0));
	fp_collector_batch_release(c, &bt);
	fp_interval_fini(&iv);
out:
	free(p);
	fp_collector_free(c);
}

int main(void)
{
	if (setup() != 0) {
		fprintf(stderr, "collector_test: cannot read this process's own files\n");
		return 1;
	}
	CHECK_EQ_INT(probe_a(1) + probe_b(1), 7);
	make_samples();
	RUN(test_aggregate_and_cut);
	RUN(test_batch_definitions);
	RUN(test_sent_then_counts_only);
	RUN(test_release_without_sent);
	RUN(test_forget);
	RUN(test_thread_names);
	RUN(test_name_after_exec);
	RUN(test_offcpu_join);
	RUN(test_offcpu_exact_total);
	RUN(test_unmapped_and_paths);
	RUN(test_new_mapping);
	RUN(test_file_mapped_this_interval);
	RUN(test_raw_user_addresses);
	RUN(test_known_hook);
	RUN(test_idle);
	RUN(test_many_cuts);
	RUN(test_full_depth);
	RUN(test_many_stacks);
	RUN(test_python_offsets_per_line);
	RUN(test_fold_below_python);
	return CHECK_DONE();
}
