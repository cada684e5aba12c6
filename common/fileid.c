/* fileid.c: synthetic file ids (fileid.h) and the SipHash they use.
 *
 * Why SipHash-2-4-128: the id must be the same on every agent and on the
 * symbolizer, so the function is fixed forever and written here (the
 * agent links no crypto library); 128 bits keep accidental collisions out
 * of reach for any fleet (2^64 files for an even chance); SipHash is
 * small, well studied and has published test vectors to check our copy
 * against.  The key is public: it separates our ids from other uses of
 * SipHash, it does not make them secret.
 *
 * Why these bytes for files without a Go build ID: the size and the first
 * and last pages alone miss the commonest change, a rebuild with one
 * constant or branch changed, which keeps size, headers and section table
 * and moves only code in the middle.  Small files (most extension
 * modules) are hashed whole; larger ones through 64 pages spread over the
 * file, at most 256 KiB read once per file, mostly from the page cache
 * since the file is mapped and running.
 */
#include "fileid.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t fileid_key[16] = "fleetprof fileid";
static const char tag_go[] = "fleetprof-fileid-go-v1";
static const char tag_content[] = "fleetprof-fileid-content-v1";

struct sip {
	uint64_t v0, v1, v2, v3;
	uint64_t total;
	uint8_t tail[8];
	size_t ntail;
};

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void store_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void sip_rounds(struct sip *s, int n)
{
	while (n--) {
		s->v0 += s->v1;
		s->v1 = rotl(s->v1, 13);
		s->v1 ^= s->v0;
		s->v0 = rotl(s->v0, 32);
		s->v2 += s->v3;
		s->v3 = rotl(s->v3, 16);
		s->v3 ^= s->v2;
		s->v0 += s->v3;
		s->v3 = rotl(s->v3, 21);
		s->v3 ^= s->v0;
		s->v2 += s->v1;
		s->v1 = rotl(s->v1, 17);
		s->v1 ^= s->v2;
		s->v2 = rotl(s->v2, 32);
	}
}

static void sip_init(struct sip *s, const uint8_t key[16], size_t outlen)
{
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);

	s->v0 = k0 ^ 0x736f6d6570736575ull;
	s->v1 = k1 ^ 0x646f72616e646f6dull;
	s->v2 = k0 ^ 0x6c7967656e657261ull;
	s->v3 = k1 ^ 0x7465646279746573ull;
	if (outlen == 16)
		s->v1 ^= 0xee;
	s->total = 0;
	s->ntail = 0;
}

static void sip_word(struct sip *s, uint64_t m)
{
	s->v3 ^= m;
	sip_rounds(s, 2);
	s->v0 ^= m;
}

static void sip_update(struct sip *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	if (!len)
		return; /* data may be NULL then, which memcpy must not see */
	s->total += len;
	if (s->ntail) {
		size_t take = 8 - s->ntail < len ? 8 - s->ntail : len;

		memcpy(s->tail + s->ntail, p, take);
		s->ntail += take, p += take, len -= take;
		if (s->ntail < 8)
			return;
		sip_word(s, load_le64(s->tail));
		s->ntail = 0;
	}
	for (; len >= 8; p += 8, len -= 8)
		sip_word(s, load_le64(p));
	memcpy(s->tail, p, len);
	s->ntail = len;
}

static void sip_final(struct sip *s, uint8_t *out, size_t outlen)
{
	uint64_t b = s->total << 56;

	for (size_t i = 0; i < s->ntail; i++)
		b |= (uint64_t)s->tail[i] << (8 * i);
	sip_word(s, b);
	s->v2 ^= outlen == 16 ? 0xee : 0xff;
	sip_rounds(s, 4);
	store_le64(out, s->v0 ^ s->v1 ^ s->v2 ^ s->v3);
	if (outlen != 16)
		return;
	s->v1 ^= 0xdd;
	sip_rounds(s, 4);
	store_le64(out + 8, s->v0 ^ s->v1 ^ s->v2 ^ s->v3);
}

void fp_siphash(const uint8_t key[16], const void *const *bufs, const size_t *lens, size_t n,
		uint8_t *out, size_t outlen)
{
	struct sip s;

	sip_init(&s, key, outlen);
	for (size_t i = 0; i < n; i++)
		sip_update(&s, bufs[i], lens[i]);
	sip_final(&s, out, outlen);
}

static void fileid_set(struct fp_build_id *id, uint8_t kind, struct sip *s)
{
	id->fb_len = FP_FILEID_LEN;
	id->fb_data[0] = 0xfb;
	id->fb_data[1] = 0x1d;
	id->fb_data[2] = kind;
	id->fb_data[3] = 1;
	sip_final(s, id->fb_data + 4, 16);
	/* Never a zero last byte: code that trims the kernel's zero padding
	 * off build-IDs must keep a synthetic id whole. */
	id->fb_data[FP_FILEID_LEN - 1] |= 1;
}

static int read_full(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		buf += n, len -= (size_t)n, off += (uint64_t)n;
	}
	return 0;
}

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* hash_contents: the CONTENT derivation's bytes after the tag. */
static int hash_contents(int fd, uint64_t size, struct sip *s)
{
	enum { CHUNK = 1u << 16 };
	uint8_t sz[8], *buf;
	int err = 0;

	buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	store_le64(sz, size);
	sip_update(s, sz, sizeof(sz));
	if (size <= FP_FILEID_WHOLE_MAX) {
		for (uint64_t off = 0; off < size && !err; off += CHUNK) {
			size_t len = size - off < CHUNK ? (size_t)(size - off) : CHUNK;

			err = read_full(fd, buf, len, off);
			if (!err)
				sip_update(s, buf, len);
		}
	} else {
		/* Page i at floor(span * i / (PAGES - 1)), without overflow. */
		uint64_t span = size - FP_FILEID_PAGE, q = span / (FP_FILEID_PAGES - 1),
			 r = span % (FP_FILEID_PAGES - 1);

		for (uint64_t i = 0; i < FP_FILEID_PAGES && !err; i++) {
			uint64_t off = q * i + r * i / (FP_FILEID_PAGES - 1);

			err = read_full(fd, buf, FP_FILEID_PAGE, off);
			if (!err)
				sip_update(s, buf, FP_FILEID_PAGE);
		}
	}
	free(buf);
	return err;
}

/* Content ids of the last files hashed, so that a file mapped by many
 * processes (or read again with each new mapping list) is hashed once
 * while it stays the same file: same device, inode, size, modification
 * and change time.  (A file rewritten in place, to the same size, within
 * one tick of the file system's clock after it was hashed would keep its
 * old id; files that are mapped for execution are not rewritten so.) */
#define CACHE_SLOTS 64

struct cached_id {
	struct stat ci_stat;
	struct fp_build_id ci_id;
	int ci_used;
};

static struct cached_id id_cache[CACHE_SLOTS];
static pthread_mutex_t id_cache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cached_id *cache_slot(const struct stat *st)
{
	uint64_t h = (uint64_t)st->st_ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)st->st_dev;

	return &id_cache[(h >> 32) % CACHE_SLOTS];
}

static int cache_get(const struct stat *st, struct fp_build_id *id)
{
	struct cached_id *c;
	int hit;

	pthread_mutex_lock(&id_cache_lock);
	c = cache_slot(st);
	hit = c->ci_used && same_file(&c->ci_stat, st);
	if (hit)
		*id = c->ci_id;
	pthread_mutex_unlock(&id_cache_lock);
	return hit;
}

static void cache_put(const struct stat *st, const struct fp_build_id *id)
{
	struct cached_id *c;

	pthread_mutex_lock(&id_cache_lock);
	c = cache_slot(st);
	c->ci_stat = *st;
	c->ci_id = *id;
	c->ci_used = 1;
	pthread_mutex_unlock(&id_cache_lock);
}

int fp_fileid(int fd, const void *go_build_id, size_t go_len, struct fp_build_id *id)
{
	struct stat before, after;
	struct sip s;
	int err;

	if (go_build_id) {
		if (go_len == 0 || go_len > FP_FILEID_GO_MAX)
			return -EINVAL;
		sip_init(&s, fileid_key, 16);
		sip_update(&s, tag_go, sizeof(tag_go));
		sip_update(&s, go_build_id, go_len);
		fileid_set(id, FP_FILEID_GO, &s);
		return 0;
	}
	if (fstat(fd, &before) != 0)
		return -errno;
	if (!S_ISREG(before.st_mode) || before.st_size <= 0)
		return -EINVAL;
	if (cache_get(&before, id))
		return 0;
	sip_init(&s, fileid_key, 16);
	sip_update(&s, tag_content, sizeof(tag_content));
	if ((err = hash_contents(fd, (uint64_t)before.st_size, &s)))
		return err;
	if (fstat(fd, &after) != 0)
		return -errno;
	if (!same_file(&before, &after))
		return -EAGAIN;
	fileid_set(id, FP_FILEID_CONTENT, &s);
	cache_put(&after, id);
	return 0;
}

int fp_fileid_kind(const struct fp_build_id *id)
{
	if (id->fb_len != FP_FILEID_LEN || id->fb_data[0] != 0xfb || id->fb_data[1] != 0x1d ||
	    id->fb_data[3] != 1)
		return 0;
	if (id->fb_data[2] == FP_FILEID_GO || id->fb_data[2] == FP_FILEID_CONTENT)
		return id->fb_data[2];
	return 0;
}
