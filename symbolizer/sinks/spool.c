/* spool.c: the on-disk queue of spool.h.
 *
 * File layout: "FPSPOOL2", the record's length (8 bytes, little-endian),
 * the owner's name's length (2 bytes, little-endian, at most OWNER_MAX),
 * the owner's name, the record, and the CRC-32 (zlib's, 4 bytes,
 * little-endian) of the name and the record.  Files of the first version
 * ("FPSPOOL1", the length, the record, its CRC-32) name no owner, and
 * are still read: their records belong to no one.  The in-memory index
 * (sequence number, file size and owner of every record, oldest first)
 * is rebuilt from the directory at open, each file's owner read from its
 * header; the files are the truth. */
#include "spool.h"
#include "fileio.h"
#include "intern.h"
#include "log.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC_V1 "FPSPOOL1"
#define MAGIC "FPSPOOL2"
#define HEADER_V1_LEN 16
#define HEADER_LEN 18  /* then the owner's name */
#define OWNER_MAX 1024 /* bytes of an owner's name kept: the rest is not told apart */
#define TRAILER_LEN 4
#define OVERHEAD (HEADER_LEN + TRAILER_LEN)
#define NAME_DIGITS 20
#define SUFFIX ".req"
#define TMP_PREFIX ".tmp-"

struct entry {
	uint64_t en_seq;
	uint64_t en_size;  /* of the file */
	uint32_t en_owner; /* index into sp_owners */
};

/* Whose records: a key (owner_key of the name in the records' headers;
 * 0 for records of no name and those of the first version) and what its
 * records hold.  A slot whose records are all gone is reused, so there
 * are never more owners than records, plus one. */
struct owner {
	uint64_t ow_key;
	uint64_t ow_bytes;
	uint64_t ow_files;
};

struct fp_spool {
	char *sp_dir;
	int sp_dirfd, sp_lockfd;
	uint64_t sp_max;
	pthread_mutex_t sp_mu;
	struct entry *sp_entries; /* oldest first */
	size_t sp_n, sp_cap;
	uint64_t sp_next;        /* next sequence number */
	uint64_t sp_busy;        /* the record handed out, 0 if none */
	struct owner *sp_owners; /* [0]: no name */
	size_t sp_nowners, sp_owners_cap;
	struct fp_spool_stats sp_stats;
};

static void name_of(uint64_t seq, char *buf, size_t len)
{
	snprintf(buf, len, "%0*" PRIu64 SUFFIX, NAME_DIGITS, seq);
}

/* parse_name: the sequence number of a record's file name, or 0. */
static uint64_t parse_name(const char *name)
{
	uint64_t seq = 0;
	int i;

	for (i = 0; i < NAME_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return 0;
		if (seq > (UINT64_MAX - 9) / 10)
			return 0;
		seq = seq * 10 + (uint64_t)(name[i] - '0');
	}
	return strcmp(name + NAME_DIGITS, SUFFIX) ? 0 : seq;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return x->en_seq < y->en_seq ? -1 : x->en_seq > y->en_seq;
}

static int reserve(struct fp_spool *sp)
{
	return fp_vec_reserve(&sp->sp_entries, &sp->sp_cap, sp->sp_n + 1, sizeof(*sp->sp_entries));
}

/* remove_at: forget entry i and delete its file.  Caller holds sp_mu. */
static void remove_at(struct fp_spool *sp, size_t i)
{
	char name[64];

	name_of(sp->sp_entries[i].en_seq, name, sizeof(name));
	if (unlinkat(sp->sp_dirfd, name, 0) && errno != ENOENT)
		fp_warn("spool %s: cannot delete %s", sp->sp_dir, name);
	sp->sp_stats.ss_files--;
	sp->sp_stats.ss_bytes -= sp->sp_entries[i].en_size;
	sp->sp_owners[sp->sp_entries[i].en_owner].ow_files--;
	sp->sp_owners[sp->sp_entries[i].en_owner].ow_bytes -= sp->sp_entries[i].en_size;
	memmove(&sp->sp_entries[i], &sp->sp_entries[i + 1],
		(sp->sp_n - i - 1) * sizeof(*sp->sp_entries));
	sp->sp_n--;
}

static size_t find(const struct fp_spool *sp, uint64_t seq)
{
	size_t lo = 0, hi = sp->sp_n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sp->sp_entries[mid].en_seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sp->sp_n && sp->sp_entries[lo].en_seq == seq ? lo : SIZE_MAX;
}

/* owner_key: the key of an owner's name of len bytes (fp_hash is keyed
 * afresh by each process, so only names are kept on disk); 0 for none. */
static uint64_t owner_key(const char *name, size_t len)
{
	return len ? fp_hash(name, len) | 1 : 0;
}

/* owner_of: the index of the owner whose key is key, added (or put in a
 * free slot) if new.  Caller holds sp_mu.  0 or -ENOMEM. */
static int owner_of(struct fp_spool *sp, uint64_t key, uint32_t *idx)
{
	size_t i, free_slot = SIZE_MAX;

	if (!key) {
		*idx = 0;
		return 0;
	}
	for (i = 1; i < sp->sp_nowners; i++) {
		if (sp->sp_owners[i].ow_key == key) {
			*idx = (uint32_t)i;
			return 0;
		}
		if (!sp->sp_owners[i].ow_files && free_slot == SIZE_MAX)
			free_slot = i;
	}
	if (free_slot == SIZE_MAX) {
		if (fp_vec_reserve(&sp->sp_owners, &sp->sp_owners_cap, sp->sp_nowners + 1,
				   sizeof(*sp->sp_owners)))
			return -ENOMEM;
		free_slot = sp->sp_nowners++;
	}
	sp->sp_owners[free_slot] = (struct owner){ .ow_key = key };
	*idx = (uint32_t)free_slot;
	return 0;
}

/* make_room: drop records until `need` more bytes of owner `who` fit:
 * each time the oldest of the owner that holds the most (counting `need`
 * as who's), so that one owner adding fast drops its own records and not
 * the others'.  The record handed out is never dropped.  Caller holds
 * sp_mu. */
static void make_room(struct fp_spool *sp, uint64_t need, uint32_t who)
{
	while (sp->sp_stats.ss_bytes + need > sp->sp_max) {
		uint64_t most = 0, held;
		size_t i, top = SIZE_MAX, busy = sp->sp_busy ? find(sp, sp->sp_busy) : SIZE_MAX;

		for (i = 0; i < sp->sp_nowners; i++) {
			held = sp->sp_owners[i].ow_bytes + (i == who ? need : 0);
			if (busy != SIZE_MAX && sp->sp_entries[busy].en_owner == i)
				held -= sp->sp_entries[busy].en_size;
			if (held > most &&
			    sp->sp_owners[i].ow_files >
				    (busy != SIZE_MAX && sp->sp_entries[busy].en_owner == i)) {
				most = held;
				top = i;
			}
		}
		if (top == SIZE_MAX)
			return;
		for (i = 0; i < sp->sp_n; i++)
			if (sp->sp_entries[i].en_owner == top && i != busy)
				break;
		if (i == sp->sp_n)
			return; /* the owners' counts say it cannot be */
		remove_at(sp, i);
		sp->sp_stats.ss_dropped++;
	}
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* crc_add: crc over len bytes of p, in pieces zlib's uInt can count. */
static uLong crc_add(uLong crc, const void *p, uint64_t len)
{
	for (uint64_t off = 0; off < len;) {
		uInt n = len - off > (1u << 30) ? 1u << 30 : (uInt)(len - off);
		crc = crc32(crc, (const Bytef *)p + off, n);
		off += n;
	}
	return crc;
}

/* read_owner: the owner's name in the header of file `name` into
 * buf[OWNER_MAX], its length in *len; 0 for a file of the first version
 * or one whose header is damaged (peek deletes that one). */
static void read_owner(struct fp_spool *sp, const char *name, char *buf, size_t *len)
{
	uint8_t header[HEADER_LEN];
	size_t n;
	int fd = openat(sp->sp_dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	*len = 0;
	if (fd < 0)
		return;
	if (pread(fd, header, sizeof(header), 0) == HEADER_LEN && !memcmp(header, MAGIC, 8) &&
	    (n = get_le(header + 16, 2)) <= OWNER_MAX &&
	    pread(fd, buf, n, HEADER_LEN) == (ssize_t)n)
		*len = n;
	close(fd);
}

static int scan(struct fp_spool *sp)
{
	char owner[OWNER_MAX];
	size_t olen;
	uint32_t who;
	int fd = dup(sp->sp_dirfd), err = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	while ((de = readdir(d))) {
		uint64_t seq;

		if (!strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
			/* A record whose writer died before renaming it. */
			unlinkat(sp->sp_dirfd, de->d_name, 0);
			continue;
		}
		if (!(seq = parse_name(de->d_name)))
			continue;
		if (fstatat(sp->sp_dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		read_owner(sp, de->d_name, owner, &olen);
		if ((err = reserve(sp)) || (err = owner_of(sp, owner_key(owner, olen), &who)))
			break;
		sp->sp_entries[sp->sp_n++] = (struct entry){ seq, (uint64_t)st.st_size, who };
		sp->sp_owners[who].ow_files++;
		sp->sp_owners[who].ow_bytes += (uint64_t)st.st_size;
		sp->sp_stats.ss_files++;
		sp->sp_stats.ss_bytes += (uint64_t)st.st_size;
		if (seq >= sp->sp_next)
			sp->sp_next = seq + 1;
	}
	closedir(d);
	if (sp->sp_n)
		qsort(sp->sp_entries, sp->sp_n, sizeof(*sp->sp_entries), entry_cmp);
	return err;
}

int fp_spool_open(struct fp_spool **out, const char *dir, uint64_t max_bytes)
{
	struct fp_spool *sp;
	int err;

	if (!max_bytes)
		return -EINVAL;
	if ((err = fp_mkdirs(dir)))
		return err;
	if (!(sp = calloc(1, sizeof(*sp))))
		return -ENOMEM;
	sp->sp_dirfd = sp->sp_lockfd = -1;
	sp->sp_max = max_bytes;
	sp->sp_next = 1;
	pthread_mutex_init(&sp->sp_mu, NULL);
	if (!(sp->sp_dir = strdup(dir)) || !(sp->sp_owners = calloc(8, sizeof(*sp->sp_owners)))) {
		err = -ENOMEM;
		goto fail;
	}
	sp->sp_nowners = 1;
	sp->sp_owners_cap = 8;
	sp->sp_dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sp->sp_dirfd >= 0)
		sp->sp_lockfd = openat(sp->sp_dirfd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (sp->sp_dirfd < 0 || sp->sp_lockfd < 0) {
		err = -errno;
		goto fail;
	}
	if (flock(sp->sp_lockfd, LOCK_EX | LOCK_NB)) {
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}
	if ((err = scan(sp)))
		goto fail;
	make_room(sp, 0, 0); /* the bound may have shrunk since the last run */
	*out = sp;
	return 0;
fail:
	fp_spool_close(sp);
	return err;
}

void fp_spool_close(struct fp_spool *sp)
{
	if (!sp)
		return;
	if (sp->sp_lockfd >= 0)
		close(sp->sp_lockfd);
	if (sp->sp_dirfd >= 0)
		close(sp->sp_dirfd);
	pthread_mutex_destroy(&sp->sp_mu);
	free(sp->sp_entries);
	free(sp->sp_owners);
	free(sp->sp_dir);
	free(sp);
}

static int refuse(struct fp_spool *sp, int err)
{
	pthread_mutex_lock(&sp->sp_mu);
	sp->sp_stats.ss_refused++;
	pthread_mutex_unlock(&sp->sp_mu);
	return err;
}

int fp_spool_put(struct fp_spool *sp, const char *owner, const struct iovec *iov, int iovcnt)
{
	size_t olen = owner ? strnlen(owner, OWNER_MAX) : 0;
	uint64_t key = owner_key(owner, olen);
	uint32_t who;
	uint8_t header[HEADER_LEN], trailer[TRAILER_LEN];
	char *tmp = NULL, name[64];
	uLong crc = crc32(0, NULL, 0);
	uint64_t len = 0, seq, size;
	size_t i;
	int fd, err = 0;

	crc = crc_add(crc, owner, olen);
	for (i = 0; i < (size_t)iovcnt; i++) {
		len += iov[i].iov_len;
		crc = crc_add(crc, iov[i].iov_base, iov[i].iov_len);
	}
	size = len + olen + OVERHEAD;
	if (size > sp->sp_max)
		return refuse(sp, -EFBIG);
	memcpy(header, MAGIC, 8);
	put_le(header + 8, len, 8);
	put_le(header + 16, olen, 2);
	put_le(trailer, crc, 4);

	pthread_mutex_lock(&sp->sp_mu);
	seq = sp->sp_next++;
	pthread_mutex_unlock(&sp->sp_mu);
	name_of(seq, name, sizeof(name));
	/* A random name created with O_EXCL (mkostemp, mode 0600): nothing
	 * planted in DIR at a guessed name is followed. */
	if (asprintf(&tmp, "%s/" TMP_PREFIX "XXXXXX", sp->sp_dir) < 0)
		return refuse(sp, -ENOMEM);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		err = -errno;
		free(tmp);
		return refuse(sp, err);
	}
	err = fp_write_all(fd, header, sizeof(header));
	if (!err && olen)
		err = fp_write_all(fd, owner, olen);
	for (i = 0; !err && i < (size_t)iovcnt; i++)
		err = fp_write_all(fd, iov[i].iov_base, iov[i].iov_len);
	if (!err)
		err = fp_write_all(fd, trailer, sizeof(trailer));
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(AT_FDCWD, tmp, sp->sp_dirfd, name))
		err = -errno;
	if (err)
		unlink(tmp);
	free(tmp);
	if (err)
		return refuse(sp, err);

	pthread_mutex_lock(&sp->sp_mu);
	if (!(err = owner_of(sp, key, &who)))
		make_room(sp, size, who);
	if (err || (err = reserve(sp))) {
		unlinkat(sp->sp_dirfd, name, 0);
		sp->sp_stats.ss_refused++;
	} else {
		/* Usually the newest; keep the order if another put overtook. */
		i = sp->sp_n;
		while (i && sp->sp_entries[i - 1].en_seq > seq)
			i--;
		memmove(&sp->sp_entries[i + 1], &sp->sp_entries[i],
			(sp->sp_n - i) * sizeof(*sp->sp_entries));
		sp->sp_entries[i] = (struct entry){ seq, size, who };
		sp->sp_n++;
		sp->sp_owners[who].ow_files++;
		sp->sp_owners[who].ow_bytes += size;
		sp->sp_stats.ss_files++;
		sp->sp_stats.ss_bytes += size;
		sp->sp_stats.ss_added++;
	}
	pthread_mutex_unlock(&sp->sp_mu);
	return err;
}

/* read_record: the record in file `name`, checked.  0, -EBADMSG (damaged
 * or cut short), -ENOMEM or another negative errno. */
static int read_record(struct fp_spool *sp, const char *name, void **data, size_t *len,
		       int64_t *written)
{
	uint8_t header[HEADER_LEN], trailer[TRAILER_LEN], owner[OWNER_MAX];
	uint64_t rlen, hlen, olen = 0;
	uLong crc = crc32(0, NULL, 0);
	uint8_t *buf = NULL;
	struct stat st;
	int fd, err = 0;

	fd = openat(sp->sp_dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	if ((uint64_t)st.st_size < HEADER_V1_LEN + TRAILER_LEN ||
	    pread(fd, header, HEADER_V1_LEN, 0) != HEADER_V1_LEN) {
		err = -EBADMSG;
		goto out;
	}
	if (!memcmp(header, MAGIC_V1, 8)) {
		hlen = HEADER_V1_LEN;
	} else if (!memcmp(header, MAGIC, 8) && (uint64_t)st.st_size >= OVERHEAD &&
		   pread(fd, header + HEADER_V1_LEN, HEADER_LEN - HEADER_V1_LEN, HEADER_V1_LEN) ==
			   HEADER_LEN - HEADER_V1_LEN &&
		   (olen = get_le(header + 16, 2)) <= OWNER_MAX &&
		   pread(fd, owner, olen, HEADER_LEN) == (ssize_t)olen) {
		hlen = HEADER_LEN + olen;
		crc = crc_add(crc, owner, olen);
	} else {
		err = -EBADMSG;
		goto out;
	}
	rlen = get_le(header + 8, 8);
	if (rlen > (uint64_t)st.st_size || rlen + hlen + TRAILER_LEN != (uint64_t)st.st_size ||
	    rlen > SIZE_MAX - 1) {
		err = -EBADMSG;
		goto out;
	}
	if (!(buf = malloc(rlen + 1))) {
		err = -ENOMEM;
		goto out;
	}
	for (uint64_t off = 0; off < rlen;) {
		ssize_t n = pread(fd, buf + off, rlen - off, (off_t)(hlen + off));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EBADMSG;
			goto out;
		}
		off += (uint64_t)n;
	}
	if (pread(fd, trailer, sizeof(trailer), (off_t)(hlen + rlen)) != TRAILER_LEN ||
	    (uint32_t)crc_add(crc, buf, rlen) != (uint32_t)get_le(trailer, 4)) {
		err = -EBADMSG;
		goto out;
	}
	buf[rlen] = '\0';
	*data = buf;
	*len = (size_t)rlen;
	*written = (int64_t)st.st_mtime;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return err;
}

int fp_spool_peek(struct fp_spool *sp, uint64_t *id, void **data, size_t *len, int64_t *written)
{
	for (;;) {
		char name[64];
		uint64_t seq = 0;
		size_t i;
		int err;

		pthread_mutex_lock(&sp->sp_mu);
		for (i = 0; i < sp->sp_n; i++)
			if (sp->sp_entries[i].en_seq != sp->sp_busy) {
				seq = sp->sp_entries[i].en_seq;
				break;
			}
		if (seq)
			sp->sp_busy = seq;
		pthread_mutex_unlock(&sp->sp_mu);
		if (!seq)
			return -ENOENT;
		name_of(seq, name, sizeof(name));
		err = read_record(sp, name, data, len, written);
		if (!err) {
			*id = seq;
			return 0;
		}
		pthread_mutex_lock(&sp->sp_mu);
		sp->sp_busy = 0;
		if (err == -ENOMEM) {
			pthread_mutex_unlock(&sp->sp_mu);
			return err;
		}
		/* Damaged, cut short, unreadable or gone: never deliverable. */
		fp_warnx("spool %s: deleting %s: %s", sp->sp_dir, name,
			 err == -EBADMSG ? "damaged or incomplete" : strerror(-err));
		if ((i = find(sp, seq)) != SIZE_MAX)
			remove_at(sp, i);
		sp->sp_stats.ss_corrupt++;
		pthread_mutex_unlock(&sp->sp_mu);
	}
}

void fp_spool_release(struct fp_spool *sp, uint64_t id, int remove)
{
	size_t i;

	pthread_mutex_lock(&sp->sp_mu);
	if (sp->sp_busy == id)
		sp->sp_busy = 0;
	if (remove && (i = find(sp, id)) != SIZE_MAX)
		remove_at(sp, i);
	pthread_mutex_unlock(&sp->sp_mu);
}

size_t fp_spool_count(struct fp_spool *sp)
{
	size_t n;

	pthread_mutex_lock(&sp->sp_mu);
	n = sp->sp_n;
	pthread_mutex_unlock(&sp->sp_mu);
	return n;
}

void fp_spool_stats(struct fp_spool *sp, struct fp_spool_stats *st)
{
	pthread_mutex_lock(&sp->sp_mu);
	*st = sp->sp_stats;
	pthread_mutex_unlock(&sp->sp_mu);
}
