/* devfetch.c: fetching symbol sections from devices, driven from here.
 * The copy's ELF structure (sent by the device: untrusted) is read with
 * libelf only in the isolated child (isolate.h): each stage's plan is
 * made there and comes back as the fetch's new state and its ranges. */
#include "devfetch.h"
#include "cli.h"
#include "elfinit.h"
#include "intern.h"
#include "isolate.h"
#include "log.h"
#include "pyinterp.h"
#include "vec.h"
#include "wire.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PENDING FP_WIRE_MAX_RANGES /* ranges outstanding per file: one reply */

enum fetch_stage {
	STAGE_HEADER,   /* asked for the ELF header */
	STAGE_TABLES,   /* section and program header tables */
	STAGE_NAMES,    /* the section name table */
	STAGE_SECTIONS, /* symbol tables and notes; or CFI and notes */
	STAGE_VERSION,  /* a CPython interpreter's Py_Version, if any */
	STAGE_DONE,
	STAGE_FAILED,
	STAGE_EXPIRED, /* no answer in time: may start again */
};

/* A build-ID's failed fetches, kept when it starts again. */
struct fetch_history {
	uint32_t fh_attempts; /* failed so far */
	uint32_t fh_nhosts;
	uint64_t fh_hosts[FP_DEVFETCH_FAIL_HOSTS]; /* whose fetches failed */
	uint64_t fh_failed_ms;                     /* the last failure, CLOCK_MONOTONIC */
};

/* What a fetch is for: the symbols (and, within the budget, the CFI) of a
 * file no source of the symbolizer has, or the CFI alone of one whose
 * symbols are here or on their way. */
enum fetch_what { FETCH_SYMBOLS, FETCH_CFI };

struct fetch {
	struct fp_build_id fe_id;
	uint8_t fe_what;      /* enum fetch_what */
	uint8_t fe_want_cfi;  /* FETCH_SYMBOLS: the CFI sections too */
	uint32_t fe_cfi_secs; /* CFI sections asked for (STAGE_NAMES) */
	uint64_t fe_session;
	uint64_t fe_host; /* the session's host (fp_devfetch_want) */
	struct fetch_history fe_history;
	enum fetch_stage fe_stage;
	time_t fe_last;    /* last request or answer */
	int fe_fd;         /* the sparse copy, from the first answer; or -1 */
	uint64_t fe_size;  /* the file's size, from the first answer */
	uint64_t fe_bytes; /* asked for so far */
	size_t fe_npending;
	struct fp_range *fe_pending; /* MAX_PENDING of them while running */
	int fe_py;                   /* asked for Py_Version: */
	uint64_t fe_py_shdr;         /* where its section's header is */
	struct fp_pyinterp_site fe_py_site;
};

struct fp_devfetch {
	struct fp_resolver *df_resolver;
	char *df_tmpdir;
	struct fp_intern *df_ids; /* build-ID and what -> df_fetches index */
	struct fetch *df_fetches;
	size_t df_cap;
	time_t df_expired_at; /* last fp_devfetch_expire scan */
	uint32_t df_timeout_s, df_retry_s;
	struct fp_devfetch_stats df_stats;
};

static int running(const struct fetch *fe)
{
	return fe->fe_stage < STAGE_DONE;
}

/* fetch_key: the key of id's fetch for what in df_ids: the build-ID, then
 * what; its length. */
static size_t fetch_key(const struct fp_build_id *id, int what, uint8_t key[FP_BUILD_ID_MAX + 1])
{
	memcpy(key, id->fb_data, id->fb_len);
	key[id->fb_len] = (uint8_t)what;
	return (size_t)id->fb_len + 1;
}

/* fetch_find: id's fetch for what, or NULL. */
static struct fetch *fetch_find(struct fp_devfetch *f, const struct fp_build_id *id, int what)
{
	uint8_t key[FP_BUILD_ID_MAX + 1];
	uint32_t idx;

	if (fp_intern_find(f->df_ids, key, fetch_key(id, what, key), &idx) || idx >= f->df_cap)
		return NULL;
	return &f->df_fetches[idx];
}

/* cfi_tell: what came of a CFI fetch, for the resolver (enum
 * fp_cfi_device). */
static void cfi_tell(struct fp_devfetch *f, const struct fetch *fe, int what)
{
	if (fe->fe_what == FETCH_CFI && f->df_resolver)
		fp_resolver_cfi_device(f->df_resolver, &fe->fe_id, what);
}

static const char *noun(const struct fetch *fe)
{
	return fe->fe_what == FETCH_CFI ? "CFI" : "symbols";
}

/* fetch_end: a running fetch stops holding anything. */
static void fetch_end(struct fp_devfetch *f, struct fetch *fe, enum fetch_stage stage)
{
	fe->fe_stage = stage;
	fe->fe_npending = 0;
	free(fe->fe_pending);
	fe->fe_pending = NULL;
	if (fe->fe_fd >= 0)
		close(fe->fe_fd);
	fe->fe_fd = -1;
	f->df_stats.dv_active--;
}

int fp_devfetch_alloc(struct fp_devfetch **out, struct fp_resolver *r, const char *tmpdir,
		      uint32_t timeout_s, uint32_t retry_s)
{
	struct fp_devfetch *f = calloc(1, sizeof(*f));

	if (!f || !(f->df_tmpdir = strdup(tmpdir)) || fp_intern_alloc(&f->df_ids)) {
		if (f)
			free(f->df_tmpdir);
		free(f);
		return -ENOMEM;
	}
	f->df_resolver = r;
	f->df_timeout_s = timeout_s;
	f->df_retry_s = retry_s;
	fp_elf_init(); /* the plans read the fetched headers with libelf */
	*out = f;
	return 0;
}

void fp_devfetch_free(struct fp_devfetch *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < fp_intern_count(f->df_ids) && i < f->df_cap; i++)
		if (running(&f->df_fetches[i]))
			fetch_end(f, &f->df_fetches[i], STAGE_FAILED);
	fp_intern_free(f->df_ids);
	free(f->df_fetches);
	free(f->df_tmpdir);
	free(f);
}

void fp_devfetch_stats(const struct fp_devfetch *f, struct fp_devfetch_stats *st)
{
	*st = f->df_stats;
}

/* given_up: whether h's build-ID is asked of no device any more. */
static int given_up(const struct fetch_history *h)
{
	return h->fh_attempts >= FP_DEVFETCH_ATTEMPTS || h->fh_nhosts >= FP_DEVFETCH_FAIL_HOSTS;
}

static int failed_on(const struct fetch_history *h, uint64_t host)
{
	for (uint32_t i = 0; i < h->fh_nhosts; i++)
		if (h->fh_hosts[i] == host)
			return 1;
	return 0;
}

/* backoff_s: how long after h's last failure the hosts it failed on may
 * try again: df_retry_s, doubled with each failure. */
static uint64_t backoff_s(const struct fp_devfetch *f, const struct fetch_history *h)
{
	uint32_t shift = h->fh_attempts ? h->fh_attempts - 1 : 0;

	return (uint64_t)f->df_retry_s << (shift > 16 ? 16 : shift);
}

/* fetch_fail: one device's failure is not the build-ID's: it is asked
 * again, of another host at once and of the same after backoff(), until
 * FP_DEVFETCH_ATTEMPTS failures or FP_DEVFETCH_FAIL_HOSTS hosts. */
static void fetch_fail(struct fp_devfetch *f, struct fetch *fe, const char *why)
{
	struct fetch_history *h = &fe->fe_history;
	char hex[2 * FP_BUILD_ID_MAX + 1];

	h->fh_attempts++;
	h->fh_failed_ms = fp_mono_ms();
	if (!failed_on(h, fe->fe_host) && h->fh_nhosts < FP_DEVFETCH_FAIL_HOSTS)
		h->fh_hosts[h->fh_nhosts++] = fe->fe_host;
	fetch_end(f, fe, STAGE_FAILED);
	f->df_stats.dv_failed++;
	fp_build_id_hex(&fe->fe_id, hex);
	if (given_up(h)) {
		f->df_stats.dv_given_up++;
		fp_warnx("%s of %s from the device: %s; failed %u times on %u hosts, "
			 "not asking again",
			 noun(fe), hex, why, h->fh_attempts, h->fh_nhosts);
	} else {
		fp_warnx("%s of %s from the device: %s; asking another host, or this one "
			 "in %llu s",
			 noun(fe), hex, why, (unsigned long long)backoff_s(f, h));
	}
	cfi_tell(f, fe, given_up(h) ? FP_CFI_DEVICE_NONE : FP_CFI_DEVICE_RETRY);
}

/* may_retry: whether a failed fetch may start again from a session of
 * host. */
static int may_retry(const struct fp_devfetch *f, const struct fetch *fe, uint64_t host)
{
	const struct fetch_history *h = &fe->fe_history;

	if (given_up(h))
		return 0;
	return !failed_on(h, host) || fp_mono_ms() - h->fh_failed_ms >= backoff_s(f, h) * 1000;
}

void fp_devfetch_expire(struct fp_devfetch *f)
{
	char hex[2 * FP_BUILD_ID_MAX + 1];
	time_t now = time(NULL);
	size_t i;

	if (!f->df_stats.dv_active || now == f->df_expired_at)
		return;
	f->df_expired_at = now;
	for (i = 0; i < fp_intern_count(f->df_ids) && i < f->df_cap; i++) {
		struct fetch *fe = &f->df_fetches[i];

		if (!running(fe) || now - fe->fe_last <= (time_t)f->df_timeout_s)
			continue;
		fp_build_id_hex(&fe->fe_id, hex);
		fp_warnx("%s of %s from the device: no answer in %u s; asking again later",
			 noun(fe), hex, f->df_timeout_s);
		fetch_end(f, fe, STAGE_EXPIRED);
		f->df_stats.dv_expired++;
		cfi_tell(f, fe, FP_CFI_DEVICE_RETRY);
	}
}

size_t fp_devfetch_running(const struct fp_devfetch *f, uint64_t session)
{
	size_t i, mine = 0;

	for (i = 0; f->df_stats.dv_active && i < fp_intern_count(f->df_ids) && i < f->df_cap; i++)
		mine += running(&f->df_fetches[i]) && f->df_fetches[i].fe_session == session;
	return mine;
}

/* may_start: whether a fetch from session may start now, answering in a
 * reply that asks for n ranges already. */
static int may_start(const struct fp_devfetch *f, uint64_t session, size_t n)
{
	if (n >= FP_WIRE_MAX_RANGES || f->df_stats.dv_active >= FP_DEVFETCH_ACTIVE)
		return 0;
	return fp_devfetch_running(f, session) < FP_DEVFETCH_PER_SESSION;
}

/* ask: queue [offset, offset + length) in pieces of at most FP_RANGE_MAX. */
static int ask(struct fetch *fe, uint64_t offset, uint64_t length, struct fp_range **ranges,
	       size_t *n)
{
	while (length) {
		uint32_t piece = length > FP_RANGE_MAX ? FP_RANGE_MAX : (uint32_t)length;
		struct fp_range *p;

		if (fe->fe_npending == MAX_PENDING || *n >= FP_WIRE_MAX_RANGES ||
		    fe->fe_bytes + piece > FP_DEVFETCH_MAX_BYTES)
			return -E2BIG;
		p = realloc(*ranges, (*n + 1) * sizeof(**ranges));
		if (!p)
			return -ENOMEM;
		*ranges = p;
		p[*n] = (struct fp_range){ fe->fe_id, offset, piece };
		fe->fe_pending[fe->fe_npending++] = p[*n];
		(*n)++;
		fe->fe_bytes += piece;
		offset += piece;
		length -= piece;
	}
	return 0;
}

/* want: fp_devfetch_want for what (enum fetch_what). */
static int want(struct fp_devfetch *f, uint64_t session, uint64_t host,
		const struct fp_build_id *id, int what, struct fp_range **ranges, size_t *n)
{
	uint8_t key[FP_BUILD_ID_MAX + 1];
	size_t klen = fetch_key(id, what, key);
	struct fetch_history history = { 0 };
	const struct fetch *other;
	struct fetch *fe;
	uint32_t idx;
	int added, retry = 0, err;

	if (fp_intern_find(f->df_ids, key, klen, &idx) == 0) {
		if (idx >= f->df_cap)
			return 0; /* no memory for it once: ended */
		fe = &f->df_fetches[idx];
		retry = fe->fe_stage == STAGE_FAILED;
		if (fe->fe_stage != STAGE_EXPIRED && !(retry && may_retry(f, fe, host)))
			return 0; /* running, done, or failed not long ago */
		history = fe->fe_history;
	} else if (fp_intern_count(f->df_ids) >= FP_DEVFETCH_TRACKED) {
		f->df_stats.dv_deferred++;
		return 0;
	}
	/* One fetch of a file at a time: an answer names the file, not the
	 * fetch.  (A file's symbols fetch brings its CFI.) */
	other = fetch_find(f, id, what == FETCH_CFI ? FETCH_SYMBOLS : FETCH_CFI);
	if ((other && running(other)) || !may_start(f, session, *n)) {
		f->df_stats.dv_deferred++;
		return 0;
	}
	if (fp_intern_get(f->df_ids, key, klen, &idx, &added))
		return -ENOMEM;
	if (fp_vec_reserve(&f->df_fetches, &f->df_cap, (size_t)idx + 1, sizeof(*f->df_fetches)))
		return -ENOMEM; /* interned, never started: a gap (STAGE_FAILED) */
	other = fetch_find(f, id, what == FETCH_CFI ? FETCH_SYMBOLS : FETCH_CFI); /* moved */
	fe = &f->df_fetches[idx];
	*fe = (struct fetch){ .fe_id = *id,
			      .fe_what = (uint8_t)what,
			      /* Not what a CFI fetch brought already. */
			      .fe_want_cfi = what == FETCH_SYMBOLS &&
					     !(other && other->fe_stage == STAGE_DONE),
			      .fe_session = session,
			      .fe_host = host,
			      .fe_history = history,
			      .fe_stage = STAGE_FAILED,
			      .fe_last = time(NULL),
			      .fe_fd = -1 };
	if (!(fe->fe_pending = malloc(MAX_PENDING * sizeof(*fe->fe_pending))))
		return -ENOMEM;
	fe->fe_stage = STAGE_HEADER;
	f->df_stats.dv_started++;
	f->df_stats.dv_cfi_started += what == FETCH_CFI;
	f->df_stats.dv_retried += retry;
	f->df_stats.dv_active++;
	err = ask(fe, 0, sizeof(Elf64_Ehdr), ranges, n) == -ENOMEM ? -ENOMEM : 0;
	cfi_tell(f, fe, FP_CFI_DEVICE_ASKED);
	return err;
}

int fp_devfetch_want(struct fp_devfetch *f, uint64_t session, uint64_t host,
		     const struct fp_build_id *id, struct fp_range **ranges, size_t *n)
{
	return want(f, session, host, id, FETCH_SYMBOLS, ranges, n);
}

int fp_devfetch_want_cfi(struct fp_devfetch *f, uint64_t session, uint64_t host,
			 const struct fp_build_id *id, struct fp_range **ranges, size_t *n)
{
	return want(f, session, host, id, FETCH_CFI, ranges, n);
}

/* The sections worth fetching: symbols, their strings, notes (build-ID,
 * Go build ID), MiniDebugInfo, Go's function table (all a stripped Go
 * binary has). */
static int wanted_section(const char *name, const GElf_Shdr *sh)
{
	static const char *const names[] = { ".symtab",        ".strtab",
					     ".dynsym",        ".dynstr",
					     ".gnu_debugdata", ".gnu_debuglink",
					     ".gopclntab",     ".data.rel.ro.gopclntab" };
	size_t i;

	if (sh->sh_type == SHT_NOBITS || !sh->sh_size)
		return 0;
	if (sh->sh_type == SHT_NOTE)
		return 1;
	for (i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return 1;
	return 0;
}

/* The sections an unwind table is compiled from (cfi.h), fetched when the
 * budget left after the symbols allows, so that the sparse copy yields the
 * table the whole file would; all a CFI fetch asks for, with the notes
 * (the build-ID is checked) and, when the file has a .PyRuntime section
 * (CPython 3.11 and later), the dynamic symbols, where pyinterp.h finds
 * the interpreter for the table's trailer. */
static int cfi_section(const char *name, const GElf_Shdr *sh)
{
	return name && sh->sh_type != SHT_NOBITS && sh->sh_size &&
	       (!strcmp(name, ".eh_frame") || !strcmp(name, ".eh_frame_hdr") ||
		!strcmp(name, ".debug_frame"));
}

/* cfi_fetch_section: besides the CFI sections (asked for after the
 * others), what a CFI fetch asks for: notes, and the dynamic symbols of a
 * CPython interpreter (python: the file has a .PyRuntime section). */
static int cfi_fetch_section(const char *name, const GElf_Shdr *sh, int python)
{
	if (sh->sh_type == SHT_NOBITS || !sh->sh_size)
		return 0;
	if (sh->sh_type == SHT_NOTE)
		return 1;
	return python && name && (!strcmp(name, ".dynsym") || !strcmp(name, ".dynstr"));
}

/* mark_absent: make section i of the copy a NOBITS section, so that no
 * reader takes the holes where its bytes would be (DWARF, code) for data. */
static int mark_absent(int fd, const GElf_Ehdr *eh, size_t i)
{
	uint32_t type = SHT_NOBITS;
	unsigned char b[4];
	off_t at = (off_t)(eh->e_shoff + i * eh->e_shentsize + 4); /* sh_type, both classes */

	if (eh->e_ident[EI_DATA] == ELFDATA2MSB) {
		b[0] = (uint8_t)(type >> 24), b[1] = (uint8_t)(type >> 16);
		b[2] = (uint8_t)(type >> 8), b[3] = (uint8_t)type;
	} else {
		b[0] = (uint8_t)type, b[1] = (uint8_t)(type >> 8);
		b[2] = (uint8_t)(type >> 16), b[3] = (uint8_t)(type >> 24);
	}
	return pwrite(fd, b, sizeof(b), at) == (ssize_t)sizeof(b) ? 0 : -EINVAL;
}

/* ask_version: when the copy has the symbol tables of a CPython
 * interpreter (3.11+) but not the bytes of its Py_Version, which
 * pyinterp.c reads for the version of its unwind table's trailer (an
 * absent section is NOBITS in the copy): ask for those bytes and for the
 * header of their section as the file has it (whether it is NOBITS
 * there too); narrow_version then makes it hold just them.  Only a
 * read-only data section (.rodata), whose address no other reader uses,
 * and only within what the budget leaves: else the version stays
 * unknown. */
static int ask_version(struct fetch *fe, Elf *elf, const GElf_Ehdr *eh, struct fp_range **ranges,
		       size_t *n)
{
	const uint64_t hsize = sizeof(Elf64_Shdr);
	struct fp_pyinterp_site site;
	uint64_t hdr;
	Elf_Scn *scn;
	GElf_Shdr sh;
	int err;

	if (fp_pyinterp_version_site(elf, &site) != 1 || eh->e_shentsize != hsize ||
	    !(scn = elf_getscn(elf, site.ps_shndx)) || !gelf_getshdr(scn, &sh) ||
	    sh.sh_type != SHT_NOBITS || (sh.sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
		return 0;
	/* libelf read this header from the copy: it lies within the file. */
	hdr = eh->e_shoff + site.ps_shndx * hsize;
	if (hdr > fe->fe_size || hsize > fe->fe_size - hdr || site.ps_offset > fe->fe_size ||
	    site.ps_len > fe->fe_size - site.ps_offset || fe->fe_npending + 2 > MAX_PENDING ||
	    hsize + site.ps_len > FP_DEVFETCH_MAX_BYTES - fe->fe_bytes)
		return 0;
	if ((err = ask(fe, hdr, hsize, ranges, n)) ||
	    (err = ask(fe, site.ps_offset, site.ps_len, ranges, n)))
		return err;
	fe->fe_py = 1;
	fe->fe_py_shdr = hdr;
	fe->fe_py_site = site;
	return 0;
}

/* narrow_version: the header of Py_Version's section is now the file's
 * (ask_version); unless that says NOBITS, or disagrees with the copy's
 * about where Py_Version lies, make it a section of just the bytes
 * fetched, at Py_Version's address, so that pyinterp.c reads them as it
 * does in the whole file and no reader takes the holes for data; else
 * mark it absent again.  ELF64 little-endian: what pyinterp.c reads. */
static int narrow_version(struct fetch *fe)
{
	const struct fp_pyinterp_site *site = &fe->fe_py_site;
	uint64_t addr, off, size;
	Elf64_Shdr sh;

	if (pread(fe->fe_fd, &sh, sizeof(sh), (off_t)fe->fe_py_shdr) != (ssize_t)sizeof(sh))
		return -EINVAL;
	addr = le64toh(sh.sh_addr);
	off = le64toh(sh.sh_offset);
	size = le64toh(sh.sh_size);
	if (le32toh(sh.sh_type) == SHT_NOBITS)
		return 0;
	if (site->ps_addr < addr || site->ps_addr - addr >= size ||
	    off + (site->ps_addr - addr) != site->ps_offset ||
	    site->ps_len > size - (site->ps_addr - addr)) {
		sh.sh_type = htole32(SHT_NOBITS);
	} else {
		sh.sh_addr = htole64(site->ps_addr);
		sh.sh_offset = htole64(site->ps_offset);
		sh.sh_size = htole64(site->ps_len);
	}
	return pwrite(fe->fe_fd, &sh, sizeof(sh), (off_t)fe->fe_py_shdr) == (ssize_t)sizeof(sh)
		       ? 0
		       : -EINVAL;
}

/* next_stage: what to ask for once everything of the current stage is in.
 * -EINVAL: the bytes are not an ELF file we can use. */
static int next_stage(struct fetch *fe, struct fp_range **ranges, size_t *n)
{
	/* Mapped, not read: the copy is mostly holes. */
	Elf *elf = elf_begin(fe->fe_fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	size_t shnum, shstrndx, i;
	int err = 0;

	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		err = -EINVAL;
		goto out;
	}
	switch (fe->fe_stage) {
	case STAGE_HEADER:
		if (!eh.e_shoff || !eh.e_shentsize) {
			err = -EINVAL;
			break;
		}
		/* e_shnum 0 means "more than fit": read the first header. */
		err = ask(fe, eh.e_shoff, (uint64_t)(eh.e_shnum ? eh.e_shnum : 1) * eh.e_shentsize,
			  ranges, n);
		if (!err && eh.e_phoff && eh.e_phnum)
			err = ask(fe, eh.e_phoff, (uint64_t)eh.e_phnum * eh.e_phentsize, ranges, n);
		fe->fe_stage = STAGE_TABLES;
		break;
	case STAGE_TABLES: {
		GElf_Shdr sh;
		Elf_Scn *scn;

		if (elf_getshdrstrndx(elf, &shstrndx) || !(scn = elf_getscn(elf, shstrndx)) ||
		    !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_STRTAB) {
			err = -EINVAL;
			break;
		}
		err = ask(fe, sh.sh_offset, sh.sh_size, ranges, n);
		fe->fe_stage = STAGE_NAMES;
		break;
	}
	case STAGE_NAMES: {
		int python = 0;

		if (elf_getshdrnum(elf, &shnum) || elf_getshdrstrndx(elf, &shstrndx)) {
			err = -EINVAL;
			break;
		}
		for (i = 1; i < shnum && fe->fe_what == FETCH_CFI; i++) {
			Elf_Scn *scn = elf_getscn(elf, i);
			GElf_Shdr sh;
			const char *name;

			if (scn && gelf_getshdr(scn, &sh) &&
			    (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
			    !strcmp(name, ".PyRuntime"))
				python = 1;
		}
		/* Symbols first, then CFI with what the budget leaves. */
		for (i = 1; i < shnum && !err; i++) {
			Elf_Scn *scn = elf_getscn(elf, i);
			GElf_Shdr sh;
			const char *name;

			if (!scn || !gelf_getshdr(scn, &sh))
				continue;
			name = elf_strptr(elf, shstrndx, sh.sh_name);
			if (fe->fe_what == FETCH_CFI ? cfi_fetch_section(name, &sh, python)
						     : wanted_section(name, &sh))
				err = ask(fe, sh.sh_offset, sh.sh_size, ranges, n);
			else if (!cfi_section(name, &sh) && i != shstrndx &&
				 sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL)
				err = mark_absent(fe->fe_fd, &eh, i);
		}
		for (i = 1; i < shnum && !err; i++) {
			Elf_Scn *scn = elf_getscn(elf, i);
			GElf_Shdr sh;

			if (!scn || !gelf_getshdr(scn, &sh) ||
			    !cfi_section(elf_strptr(elf, shstrndx, sh.sh_name), &sh))
				continue;
			if ((fe->fe_what == FETCH_CFI || fe->fe_want_cfi) &&
			    sh.sh_size <= FP_DEVFETCH_MAX_BYTES - fe->fe_bytes &&
			    fe->fe_npending + sh.sh_size / FP_RANGE_MAX + 1 <= MAX_PENDING) {
				err = ask(fe, sh.sh_offset, sh.sh_size, ranges, n);
				fe->fe_cfi_secs++;
			} else {
				err = mark_absent(fe->fe_fd, &eh, i);
			}
		}
		fe->fe_stage = STAGE_SECTIONS;
		break;
	}
	case STAGE_SECTIONS:
		err = ask_version(fe, elf, &eh, ranges, n);
		fe->fe_stage = STAGE_VERSION;
		break;
	default:
		err = -EINVAL;
	}
out:
	elf_end(elf);
	return err;
}

#define STAGE_SECONDS 10 /* CPU time of a stage's plan: headers and names */

/* What a stage's child sends back: the fetch as next_stage left it, and
 * the ranges it asked for. */
struct stage_plan {
	struct fetch sp_fetch;
	uint64_t sp_nranges;
	struct fp_range sp_ranges[];
};

static int plan_stage(void *arg, int fd, void **blob, size_t *len)
{
	struct stage_plan *plan;
	struct fp_range *ranges = NULL;
	size_t n = 0;
	int err;

	plan = malloc(sizeof(*plan));
	if (!plan)
		return -ENOMEM;
	plan->sp_fetch = *(const struct fetch *)arg;
	plan->sp_fetch.fe_fd = fd;
	if ((err = next_stage(&plan->sp_fetch, &ranges, &n))) {
		free(ranges);
		free(plan);
		return err;
	}
	*len = sizeof(*plan) + n * sizeof(*ranges);
	if (!(*blob = realloc(plan, *len))) {
		free(plan);
		free(ranges);
		return -ENOMEM;
	}
	plan = *blob;
	plan->sp_nranges = n;
	if (n)
		memcpy(plan->sp_ranges, ranges, n * sizeof(*ranges));
	free(ranges);
	return 0;
}

static int plan_check(const void *blob, size_t len)
{
	const struct stage_plan *plan = blob;

	if (len < sizeof(*plan) || plan->sp_nranges > MAX_PENDING ||
	    len != sizeof(*plan) + plan->sp_nranges * sizeof(plan->sp_ranges[0]) ||
	    plan->sp_fetch.fe_npending > MAX_PENDING ||
	    plan->sp_fetch.fe_bytes > FP_DEVFETCH_MAX_BYTES)
		return -EINVAL;
	return 0;
}

/* next_stage_isolated: next_stage in the isolated child; its ranges are
 * appended to *ranges.  The child may change only the stage, what is
 * pending and asked for, and the Py_Version site; each range must lie in
 * the file.  Errors as next_stage's, and -EINVAL when the child failed or
 * broke those rules. */
static int next_stage_isolated(struct fetch *fe, struct fp_range **ranges, size_t *n)
{
	struct stage_plan *plan;
	struct fp_range *p;
	struct fetch got;
	size_t len, i;
	void *blob;
	int err;

	err = fp_isolate_call(plan_stage, fe, plan_check, fe->fe_fd, STAGE_SECONDS, &blob, &len);
	if (err)
		return err == -ENOMEM || err == -E2BIG ? err : -EINVAL;
	plan = blob;
	got = plan->sp_fetch;
	err = -EINVAL;
	if (!fp_build_id_match(&got.fe_id, &fe->fe_id) || got.fe_session != fe->fe_session ||
	    got.fe_what != fe->fe_what || got.fe_want_cfi != fe->fe_want_cfi ||
	    got.fe_cfi_secs > MAX_PENDING || got.fe_size != fe->fe_size ||
	    got.fe_bytes < fe->fe_bytes || got.fe_npending != plan->sp_nranges ||
	    got.fe_stage <= fe->fe_stage || got.fe_stage > STAGE_VERSION)
		goto out;
	for (i = 0; i < plan->sp_nranges; i++) {
		const struct fp_range *r = &plan->sp_ranges[i];

		if (!fp_build_id_match(&r->fg_build_id, &fe->fe_id) ||
		    r->fg_length > FP_RANGE_MAX || r->fg_offset > fe->fe_size ||
		    r->fg_length > fe->fe_size - r->fg_offset)
			goto out;
	}
	err = -ENOMEM;
	if (plan->sp_nranges) {
		if (!(p = realloc(*ranges, (*n + plan->sp_nranges) * sizeof(*p))))
			goto out;
		memcpy(p + *n, plan->sp_ranges, plan->sp_nranges * sizeof(*p));
		*ranges = p;
		*n += plan->sp_nranges;
	}
	got.fe_fd = fe->fe_fd;
	got.fe_last = fe->fe_last;
	/* Pending is the parent's array (the child's copy died with it); a
	 * stage starts with none pending and leaves those it asked for. */
	got.fe_pending = fe->fe_pending;
	memcpy(got.fe_pending, plan->sp_ranges, plan->sp_nranges * sizeof(*got.fe_pending));
	*fe = got;
	err = 0;
out:
	free(blob);
	return err;
}

static int finish(struct fp_devfetch *f, struct fetch *fe)
{
	int err = fe->fe_py ? narrow_version(fe) : 0;

	if (err)
		return err;
	/* The resolver takes the file: a server's workers ingest it later. */
	if (fe->fe_what == FETCH_CFI) {
		err = fp_resolver_add_cfi_async(f->df_resolver, fe->fe_fd, &fe->fe_id);
		/* Taken: what the CFI gives (a table, none, a compile
		 * failure) is the resolver's to say. */
		if (err != -EAGAIN && err != -ESTALE && err != -ENOMEM)
			err = 0;
	} else {
		err = fp_resolver_add_file_async(f->df_resolver, fe->fe_fd, &fe->fe_id);
	}
	fe->fe_fd = -1;
	if (err)
		return err;
	fetch_end(f, fe, STAGE_DONE);
	f->df_stats.dv_done++;
	return 0;
}

/* fetch_of: the fetch an answer for build-ID id is for: the running one
 * (one at a time per file), else one that ran; NULL if none. */
static struct fetch *fetch_of(struct fp_devfetch *f, const struct fp_build_id *id)
{
	struct fetch *sym = fetch_find(f, id, FETCH_SYMBOLS), *cfi = fetch_find(f, id, FETCH_CFI);

	if (cfi && (running(cfi) || !sym))
		return cfi;
	return sym;
}

int fp_devfetch_data(struct fp_devfetch *f, const struct fp_file_data *d, struct fp_range **ranges,
		     size_t *n)
{
	char hex[2 * FP_BUILD_ID_MAX + 1];
	struct fetch *fe = fetch_of(f, &d->fd_build_id);
	size_t i;
	int err;

	if (!fe)
		return -EINVAL;
	if (!running(fe))
		return 0; /* late answers of a finished, failed or expired fetch */
	if (d->fd_session != fe->fe_session)
		return -EINVAL;
	for (i = 0; i < fe->fe_npending; i++)
		if (fe->fe_pending[i].fg_offset == d->fd_offset)
			break;
	if (i == fe->fe_npending)
		return -EINVAL;
	fe->fe_pending[i] = fe->fe_pending[--fe->fe_npending];
	fe->fe_last = time(NULL);
	if (d->fd_error) {
		fetch_fail(f, fe, strerror((int)d->fd_error));
		return 0;
	}
	if (fe->fe_stage == STAGE_HEADER) {
		/* Opened now, not when asked: a device that never answers
		 * holds no descriptor. */
		fe->fe_fd = open(f->df_tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fe->fe_fd < 0) {
			fetch_fail(f, fe, strerror(errno));
			return 0;
		}
		if (d->fd_file_size > (uint64_t)1 << 40 ||
		    ftruncate(fe->fe_fd, (off_t)d->fd_file_size)) {
			fetch_fail(f, fe, "implausible file size");
			return 0;
		}
		fe->fe_size = d->fd_file_size;
	}
	if (d->fd_offset > fe->fe_size || d->fd_len > fe->fe_size - d->fd_offset ||
	    pwrite(fe->fe_fd, d->fd_data, d->fd_len, (off_t)d->fd_offset) != (ssize_t)d->fd_len) {
		fetch_fail(f, fe, "bytes outside the file");
		return 0;
	}
	f->df_stats.dv_bytes += d->fd_len;
	if (fe->fe_npending)
		return 0;
	if (fe->fe_stage != STAGE_VERSION) {
		err = next_stage_isolated(fe, ranges, n);
		if (!err && fe->fe_what == FETCH_CFI && fe->fe_stage == STAGE_SECTIONS &&
		    !fe->fe_cfi_secs) {
			/* An answer: the file has no CFI (the notes asked
			 * for with nothing else are not needed). */
			fetch_end(f, fe, STAGE_DONE);
			f->df_stats.dv_done++;
			f->df_stats.dv_cfi_none++;
			cfi_tell(f, fe, FP_CFI_DEVICE_NONE);
			fp_build_id_hex(&fe->fe_id, hex);
			fp_info("CFI of %s: the device's file has none", hex);
			return 0;
		}
		if (!err && !fe->fe_npending && fe->fe_stage == STAGE_SECTIONS)
			err = next_stage_isolated(fe, ranges,
						  n); /* no sections: on to the version */
		if (err == -ENOMEM)
			return err;
		if (!err && !fe->fe_npending && fe->fe_stage != STAGE_VERSION)
			err = -EINVAL; /* nothing more to ask for, too early */
		if (err)
			fetch_fail(f, fe,
				   err == -E2BIG ? "sections too large" : "not a usable ELF file");
		if (err || fe->fe_npending)
			return 0;
	}
	fp_build_id_hex(&fe->fe_id, hex);
	if ((err = finish(f, fe)))
		fetch_fail(f, fe,
			   err == -EAGAIN ? "the symbol workers' queue is full"
					  : "the fetched sections hold no usable symbols");
	else
		fp_info("%s of %s fetched from the device", noun(fe), hex);
	return 0;
}
