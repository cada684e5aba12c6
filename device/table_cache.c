/* table_cache.c: the held tables' index, and their files; see
 * table_cache.h. */
#include "table_cache.h"
#include "cli.h"
#include "fileio.h"
#include "intern.h"
#include "log.h"
#include "unwind_table.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TC_MAGIC "FPTC"
#define TC_VERSION 1
#define TC_SUFFIX ".table"
#define TC_TEMP_PREFIX ".tmp-"
/* Entries kept (files on disk and tables held in memory): bounds the
 * index whatever the directory holds. */
#define TC_ENTRIES_MAX 16384

struct tc_header {
	char th_magic[4]; /* TC_MAGIC */
	uint32_t th_version;
	uint64_t th_table_id; /* fp_unwind_table_id of the build-ID and the table */
	uint32_t th_len;      /* bytes of the table after the header */
	uint8_t th_build_id_len;
	uint8_t th_build_id[FP_BUILD_ID_MAX];
	uint8_t th_flags; /* FP_TABLE_CACHE_* */
	uint8_t th_pad[6];
};
_Static_assert(sizeof(struct tc_header) == 48, "the header is 48 bytes on disk");

struct tc_entry {
	struct fp_build_id te_id;
	uint64_t te_table_id;
	uint64_t te_used;  /* realtime ns of the last use (the file's mtime) */
	uint64_t te_fsize; /* the file's bytes, counted in tc_bytes */
	uint8_t te_held;   /* te_table_id names a table held */
	uint8_t te_on_disk;
};

struct fp_table_cache {
	char *c_dir; /* NULL: memory only */
	int c_dfd;
	uint64_t c_max_bytes;
	struct fp_intern *c_ids; /* build-ID -> c_entries index */
	struct tc_entry *c_entries;
	size_t c_entries_cap;
	struct fp_table_cache_stats c_stats;
};

static uint64_t now_ns(void)
{
	return fp_now_ns(CLOCK_REALTIME);
}

static void file_name(const struct fp_build_id *id, const char *prefix, char *buf, size_t len)
{
	char hex[FP_BUILD_ID_HEX_SIZE];

	fp_build_id_hex(id, hex);
	snprintf(buf, len, "%s%s%s", prefix, hex, TC_SUFFIX);
}

/* temp_name: where id's file is written before it is renamed: named for
 * this process too, so that two agents sharing the directory (a test
 * host) do not write into one file. */
static void temp_name(const struct fp_build_id *id, char *buf, size_t len)
{
	char hex[FP_BUILD_ID_HEX_SIZE];

	fp_build_id_hex(id, hex);
	snprintf(buf, len, "%s%s.%d%s", TC_TEMP_PREFIX, hex, (int)getpid(), TC_SUFFIX);
}

/* entry: id's entry, made (empty) when new; NULL on ENOMEM or past
 * TC_ENTRIES_MAX. */
static struct tc_entry *entry(struct fp_table_cache *c, const struct fp_build_id *id, int make)
{
	uint32_t i;
	int added;

	if (!fp_intern_find(c->c_ids, id->fb_data, id->fb_len, &i))
		return &c->c_entries[i];
	if (!make || fp_intern_count(c->c_ids) >= TC_ENTRIES_MAX ||
	    fp_intern_get(c->c_ids, id->fb_data, id->fb_len, &i, &added))
		return NULL;
	if (fp_vec_reserve_zeroed(&c->c_entries, &c->c_entries_cap, (size_t)i + 1,
				  sizeof(*c->c_entries)))
		return NULL; /* the id stays interned, with a zeroed entry */
	c->c_entries[i] = (struct tc_entry){ .te_id = *id };
	return &c->c_entries[i];
}

static const struct tc_entry *find(const struct fp_table_cache *c, const struct fp_build_id *id)
{
	uint32_t i;

	if (fp_intern_find(c->c_ids, id->fb_data, id->fb_len, &i) || i >= c->c_entries_cap)
		return NULL;
	return &c->c_entries[i];
}

/* unlink_file: remove e's file and uncount it. */
static void unlink_file(struct fp_table_cache *c, struct tc_entry *e)
{
	char name[64];

	file_name(&e->te_id, "", name, sizeof(name));
	if (unlinkat(c->c_dfd, name, 0) && errno != ENOENT)
		c->c_stats.tc_errors++;
	if (e->te_on_disk) {
		c->c_stats.tc_files--;
		c->c_stats.tc_bytes -= e->te_fsize;
	}
	e->te_on_disk = 0;
	e->te_fsize = 0;
}

/* bad_file: a file failed a check: it goes, and its table with it. */
static void bad_file(struct fp_table_cache *c, struct tc_entry *e, const char *why)
{
	char name[64];

	file_name(&e->te_id, "", name, sizeof(name));
	fp_warnx("table cache: %s/%s: %s; removed (the symbolizer sends the table again)", c->c_dir,
		 name, why);
	c->c_stats.tc_bad++;
	unlink_file(c, e);
	e->te_held = 0;
}

/* evict: the least recently used files until the rest fit the bound;
 * the entry at index keep is spared (SIZE_MAX: none). */
static void evict(struct fp_table_cache *c, size_t keep)
{
	size_t i, n = fp_intern_count(c->c_ids);

	if (n > c->c_entries_cap)
		n = c->c_entries_cap;
	while (c->c_stats.tc_bytes > c->c_max_bytes) {
		size_t victim = SIZE_MAX;

		for (i = 0; i < n; i++)
			if (c->c_entries[i].te_on_disk && i != keep &&
			    (victim == SIZE_MAX ||
			     c->c_entries[i].te_used < c->c_entries[victim].te_used))
				victim = i;
		if (victim == SIZE_MAX)
			return;
		unlink_file(c, &c->c_entries[victim]);
		c->c_stats.tc_evicted++;
	}
}

/* header_check: what is wrong with header h of a file of size bytes for
 * id, or NULL. */
static const char *header_check(const struct tc_header *h, uint64_t size,
				const struct fp_build_id *id)
{
	if (memcmp(h->th_magic, TC_MAGIC, 4) || h->th_version != TC_VERSION)
		return "not a table file of this version";
	if (h->th_build_id_len != id->fb_len || h->th_build_id_len > FP_BUILD_ID_MAX ||
	    memcmp(h->th_build_id, id->fb_data, id->fb_len))
		return "the build-ID inside is not the file's";
	if (h->th_len > FP_TABLE_MAX || size != sizeof(*h) + (uint64_t)h->th_len)
		return "its size is not the header's";
	if (h->th_flags & ~FP_TABLE_CACHE_FUNCTION_ROWS)
		return "unknown flags";
	return NULL;
}

/* read_all: len bytes at off, or -errno (-EIO: the file ended early). */
static int read_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

/* scan_one: the file name in the directory, at start: indexed when its
 * name and header are right, removed otherwise. */
static void scan_one(struct fp_table_cache *c, const char *name)
{
	size_t nlen = strlen(name), slen = strlen(TC_SUFFIX);
	char hex[FP_BUILD_ID_HEX_SIZE];
	struct fp_build_id id;
	struct tc_header h;
	struct tc_entry *e;
	struct stat st;
	const char *why = NULL;
	int fd;

	if (!strncmp(name, TC_TEMP_PREFIX, strlen(TC_TEMP_PREFIX))) {
		unlinkat(c->c_dfd, name, 0); /* a write a crash cut short */
		return;
	}
	if (nlen <= slen || strcmp(name + nlen - slen, TC_SUFFIX))
		return; /* not ours */
	if (nlen - slen < sizeof(hex)) {
		memcpy(hex, name, nlen - slen);
		hex[nlen - slen] = '\0';
	} else {
		hex[0] = '\0';
	}
	if (fp_build_id_parse(hex, &id) || !id.fb_len) {
		why = "not named by a build-ID";
	} else if (fstatat(c->c_dfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) {
		why = "not a regular file";
	} else if ((fd = openat(c->c_dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		why = "cannot be opened";
	} else {
		if (read_all(fd, &h, sizeof(h), 0))
			why = "shorter than its header";
		else
			why = header_check(&h, (uint64_t)st.st_size, &id);
		close(fd);
	}
	if (why) {
		fp_warnx("table cache: %s/%s: %s; removed", c->c_dir, name, why);
		c->c_stats.tc_bad++;
		if (unlinkat(c->c_dfd, name, 0) && errno != ENOENT)
			c->c_stats.tc_errors++;
		return;
	}
	if (!(e = entry(c, &id, 1))) {
		/* past the bound on entries: the file goes */
		if (!unlinkat(c->c_dfd, name, 0))
			c->c_stats.tc_evicted++;
		return;
	}
	*e = (struct tc_entry){ .te_id = id,
				.te_table_id = h.th_table_id,
				.te_used = (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
					   (uint64_t)st.st_mtim.tv_nsec,
				.te_fsize = (uint64_t)st.st_size,
				.te_held = 1,
				.te_on_disk = 1 };
	c->c_stats.tc_files++;
	c->c_stats.tc_bytes += e->te_fsize;
}

/* dir_open: the directory (made when missing), if it is the agent's own.
 * A descriptor or -errno. */
static int dir_open(const char *dir)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return errno == ELOOP ? -ENOTDIR : -errno;
	if (fstat(fd, &st)) {
		int err = -errno;
		close(fd);
		return err;
	}
	/* Tables decide how stacks are walked: only the agent may write them. */
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int fp_table_cache_open(struct fp_table_cache **out, const char *dir, uint64_t max_bytes)
{
	struct fp_table_cache *c = calloc(1, sizeof(*c));
	struct dirent *de;
	DIR *d;
	int fd;

	if (!c || fp_intern_alloc(&c->c_ids)) {
		free(c);
		return -ENOMEM;
	}
	c->c_dfd = -1;
	c->c_max_bytes = max_bytes;
	if (dir) {
		if ((fd = dir_open(dir)) < 0) {
			fp_table_cache_close(c);
			return fd;
		}
		c->c_dfd = fd;
		if (!(c->c_dir = strdup(dir)) || (fd = dup(c->c_dfd)) < 0) {
			fp_table_cache_close(c);
			return -ENOMEM;
		}
		if (!(d = fdopendir(fd))) {
			int err = -errno;
			close(fd);
			fp_table_cache_close(c);
			return err;
		}
		while ((de = readdir(d)))
			scan_one(c, de->d_name);
		closedir(d);
		evict(c, SIZE_MAX);
	}
	*out = c;
	return 0;
}

void fp_table_cache_close(struct fp_table_cache *c)
{
	if (!c)
		return;
	if (c->c_dfd >= 0)
		close(c->c_dfd);
	fp_intern_free(c->c_ids);
	free(c->c_entries);
	free(c->c_dir);
	free(c);
}

const char *fp_table_cache_dir(const struct fp_table_cache *c)
{
	return c->c_dir;
}

int fp_table_cache_load(struct fp_table_cache *c, const struct fp_build_id *id, void **out,
			size_t *out_len, uint32_t *flags)
{
	struct tc_entry *e = entry(c, id, 0);
	const char *why = NULL;
	struct tc_header h;
	struct stat st;
	char name[64];
	void *blob = NULL;
	int fd, err;

	if (!e || !e->te_on_disk)
		return -ENOENT;
	file_name(id, "", name, sizeof(name));
	if ((fd = openat(c->c_dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		err = -errno;
		if (err == -ENOENT || err == -ELOOP) {
			bad_file(c, e, err == -ENOENT ? "gone" : "not a regular file");
			return -EINVAL;
		}
		c->c_stats.tc_errors++;
		return err;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		why = "not a regular file";
	} else if ((err = read_all(fd, &h, sizeof(h), 0))) {
		why = "shorter than its header";
	} else if (!(why = header_check(&h, (uint64_t)st.st_size, id))) {
		if (!(blob = malloc(h.th_len ? h.th_len : 1))) {
			close(fd);
			return -ENOMEM;
		}
		if (read_all(fd, blob, h.th_len, sizeof(h)))
			why = "shorter than its header says";
		else if (fp_unwind_table_id(id, blob, h.th_len) != h.th_table_id)
			why = "its bytes do not match its id (corrupt)";
		else if (fp_unwind_table_check(blob, h.th_len))
			why = "not a well-formed table";
	}
	if (why) {
		close(fd);
		free(blob);
		bad_file(c, e, why);
		return -EINVAL;
	}
	futimens(fd, NULL); /* the most recently used, also for the next agent */
	close(fd);
	c->c_stats.tc_bytes += (uint64_t)st.st_size - e->te_fsize;
	e->te_fsize = (uint64_t)st.st_size;
	e->te_table_id = h.th_table_id;
	e->te_held = 1;
	e->te_used = now_ns();
	c->c_stats.tc_loaded++;
	*out = blob;
	*out_len = h.th_len;
	*flags = h.th_flags;
	return 0;
}

/* write_file: e's table, whole under a temporary name, then renamed. */
static int write_file(struct fp_table_cache *c, struct tc_entry *e, const void *blob, size_t len,
		      uint32_t flags)
{
	struct tc_header h = { .th_magic = TC_MAGIC,
			       .th_version = TC_VERSION,
			       .th_table_id = e->te_table_id,
			       .th_len = (uint32_t)len,
			       .th_build_id_len = e->te_id.fb_len,
			       .th_flags = (uint8_t)(flags & FP_TABLE_CACHE_FUNCTION_ROWS) };
	char name[64], tmp[80];
	int fd, err;

	memcpy(h.th_build_id, e->te_id.fb_data, e->te_id.fb_len);
	file_name(&e->te_id, "", name, sizeof(name));
	temp_name(&e->te_id, tmp, sizeof(tmp));
	fd = openat(c->c_dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	err = fp_write_all(fd, &h, sizeof(h));
	if (!err)
		err = fp_write_all(fd, blob, len);
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(c->c_dfd, tmp, c->c_dfd, name))
		err = -errno;
	if (err)
		unlinkat(c->c_dfd, tmp, 0);
	return err;
}

int fp_table_cache_store(struct fp_table_cache *c, const struct fp_build_id *id, const void *blob,
			 size_t len, uint32_t flags)
{
	uint64_t tid = fp_unwind_table_id(id, blob, len), fsize = sizeof(struct tc_header) + len;
	struct tc_entry *e = entry(c, id, 1);
	char name[64];
	int err;

	if (!e)
		return -ENOMEM;
	if (e->te_held && e->te_on_disk && e->te_table_id == tid &&
	    e->te_fsize == fsize) { /* the same table, sent again */
		file_name(id, "", name, sizeof(name));
		utimensat(c->c_dfd, name, NULL, 0);
		e->te_used = now_ns();
		return 0;
	}
	e->te_table_id = tid;
	e->te_held = 1;
	e->te_used = now_ns();
	if (c->c_dfd < 0)
		return 0;
	if (fsize > c->c_max_bytes || len > FP_TABLE_MAX) {
		if (e->te_on_disk)
			unlink_file(c, e); /* an older version */
		return -E2BIG;
	}
	if ((err = write_file(c, e, blob, len, flags))) {
		static int logged;
		c->c_stats.tc_errors++;
		if (!logged++)
			fp_warnx("table cache: cannot write in %s: %s (tables stay in memory only; "
				 "counted from now on)",
				 c->c_dir, strerror(-err));
		if (e->te_on_disk)
			unlink_file(c, e); /* what is there is an older version */
		return err;
	}
	if (e->te_on_disk) {
		c->c_stats.tc_bytes -= e->te_fsize;
		c->c_stats.tc_files--;
	}
	e->te_on_disk = 1;
	e->te_fsize = fsize;
	c->c_stats.tc_files++;
	c->c_stats.tc_bytes += fsize;
	c->c_stats.tc_stored++;
	evict(c, (size_t)(e - c->c_entries));
	return 0;
}

void fp_table_cache_drop(struct fp_table_cache *c, const struct fp_build_id *id)
{
	struct tc_entry *e = entry(c, id, 0);

	if (!e)
		return;
	if (e->te_on_disk)
		unlink_file(c, e);
	e->te_held = 0;
}

int fp_table_cache_has(const struct fp_table_cache *c, const struct fp_build_id *id)
{
	const struct tc_entry *e = find(c, id);

	return e && e->te_on_disk;
}

static int by_use_desc(const void *a, const void *b)
{
	const struct tc_entry *x = *(const struct tc_entry *const *)a,
			      *y = *(const struct tc_entry *const *)b;

	return x->te_used < y->te_used ? 1 : x->te_used > y->te_used ? -1 : 0;
}

size_t fp_table_cache_held(const struct fp_table_cache *c, fp_table_installed_fn installed,
			   void *arg, struct fp_held_table *out, size_t max)
{
	size_t i, n = 0, count = fp_intern_count(c->c_ids);
	const struct tc_entry **v;

	if (count > c->c_entries_cap)
		count = c->c_entries_cap;
	if (!max || !(v = malloc((count + 1) * sizeof(*v))))
		return 0;
	for (i = 0; i < count; i++) {
		const struct tc_entry *e = &c->c_entries[i];
		if (e->te_held && e->te_id.fb_len &&
		    (e->te_on_disk || (installed && installed(&e->te_id, arg))))
			v[n++] = e;
	}
	qsort(v, n, sizeof(*v), by_use_desc);
	if (n > max)
		n = max;
	for (i = 0; i < n; i++)
		out[i] = (struct fp_held_table){ v[i]->te_id, v[i]->te_table_id };
	free(v);
	return n;
}

void fp_table_cache_stats(const struct fp_table_cache *c, struct fp_table_cache_stats *st)
{
	*st = c->c_stats;
}
