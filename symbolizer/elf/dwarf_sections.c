/* dwarf_sections.c: the sections of one ELF file as libdwarf reads them;
 * dwarf_sections.h says what is checked and bounded. */
#include "dwarf_sections.h"

#include <elf.h>
#include <gelf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if __has_include(<libdwarf/libdwarf.h>)
#include <libdwarf/dwarf.h>
#else
#include <dwarf.h>
#endif

static int in_file(const struct dw_obj *o, uint64_t off, uint64_t size)
{
	return size <= o->do_file_size && off <= o->do_file_size - size;
}

static uint64_t load_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

uint64_t dw_load_end(const struct dw_obj *o, const uint8_t *p, int n)
{
	uint64_t v = 0;

	if (o->do_msb)
		return load_be(p, n);
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* raw_section: the bytes of a section as stored in the file. */
static const uint8_t *raw_section(const struct dw_obj *o, Elf_Scn *scn, uint64_t *size)
{
	GElf_Shdr sh;
	Elf_Data *d;

	if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
	    !in_file(o, sh.sh_offset, sh.sh_size) || sh.sh_size == 0)
		return NULL;
	d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size != sh.sh_size)
		return NULL;
	*size = d->d_size;
	return d->d_buf;
}

/* compressed_size: the inflated size a compressed section announces, and
 * where its zlib stream starts.  0 if unusable. */
static uint64_t compressed_size(const struct dw_obj *o, const struct dw_section *s,
				const uint8_t *raw, uint64_t rawsize, uint64_t *hdr)
{
	uint64_t size;

	if (s->ds_kind == DS_ZDEBUG) {
		/* "ZLIB" and a big-endian 64-bit size */
		if (rawsize < 12 || memcmp(raw, "ZLIB", 4) != 0)
			return 0;
		size = load_be(raw + 4, 8);
		*hdr = 12;
	} else if (o->do_is64) {
		/* Elf64_Chdr: type, reserved, size, addralign */
		if (rawsize < 24 || dw_load_end(o, raw, 4) != ELFCOMPRESS_ZLIB)
			return 0;
		size = dw_load_end(o, raw + 8, 8);
		*hdr = 24;
	} else {
		/* Elf32_Chdr: type, size, addralign */
		if (rawsize < 12 || dw_load_end(o, raw, 4) != ELFCOMPRESS_ZLIB)
			return 0;
		size = dw_load_end(o, raw + 4, 4);
		*hdr = 12;
	}
	if (size == 0 || size / MAX_INFLATE_RATIO > rawsize || size > MAX_DWARF_BYTES)
		return 0;
	return size;
}

static int inflate_section(struct dw_obj *o, struct dw_section *s)
{
	uint64_t rawsize = 0, hdr = 0, size;
	const uint8_t *raw = raw_section(o, s->ds_scn, &rawsize);
	z_stream zs;
	uint8_t *out;
	int zerr;

	if (!raw)
		return -EINVAL;
	size = compressed_size(o, s, raw, rawsize, &hdr);
	if (!size || size > MAX_DWARF_BYTES - o->do_inflated || rawsize - hdr > UINT32_MAX ||
	    size > UINT32_MAX)
		return -EINVAL;
	out = malloc(size);
	if (!out)
		return -ENOMEM;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit(&zs) != Z_OK) {
		free(out);
		return -ENOMEM;
	}
	zs.next_in = (Bytef *)(raw + hdr);
	zs.avail_in = (uInt)(rawsize - hdr);
	zs.next_out = out;
	zs.avail_out = (uInt)size;
	zerr = inflate(&zs, Z_FINISH);
	inflateEnd(&zs);
	if (zerr != Z_STREAM_END || zs.total_out != size) {
		free(out);
		return -EINVAL;
	}
	o->do_inflated += size;
	s->ds_data = out;
	s->ds_owned = 1;
	return 0;
}

/* The sizes libdwarf is told must be those of the data it will get. */
static void settle_section_size(struct dw_obj *o, struct dw_section *s)
{
	uint64_t rawsize = 0, hdr = 0;
	const uint8_t *raw = raw_section(o, s->ds_scn, &rawsize);

	s->ds_size = 0;
	if (!raw) {
		s->ds_kind = DS_NONE;
		return;
	}
	if (s->ds_kind == DS_PLAIN)
		s->ds_size = rawsize;
	else
		s->ds_size = compressed_size(o, s, raw, rawsize, &hdr);
	if (!s->ds_size)
		s->ds_kind = DS_NONE;
}

static int obj_section_info(void *obj, Dwarf_Half idx, Dwarf_Obj_Access_Section *ret, int *err)
{
	struct dw_obj *o = obj;
	struct dw_section *s;

	(void)err;
	if (idx >= o->do_nsecs)
		return DW_DLV_NO_ENTRY;
	s = &o->do_secs[idx];
	memset(ret, 0, sizeof(*ret));
	ret->name = s->ds_kind == DS_NONE ? "" : s->ds_name;
	ret->type = s->ds_kind == DS_NONE ? SHT_NULL : SHT_PROGBITS;
	ret->size = s->ds_kind == DS_NONE ? 0 : s->ds_size;
	return DW_DLV_OK;
}

static Dwarf_Endianness obj_byte_order(void *obj)
{
	return ((struct dw_obj *)obj)->do_msb ? DW_OBJECT_MSB : DW_OBJECT_LSB;
}

static Dwarf_Small obj_length_size(void *obj)
{
	return ((struct dw_obj *)obj)->do_is64 ? 8 : 4;
}

static Dwarf_Small obj_pointer_size(void *obj)
{
	return ((struct dw_obj *)obj)->do_is64 ? 8 : 4;
}

static Dwarf_Unsigned obj_section_count(void *obj)
{
	return ((struct dw_obj *)obj)->do_nsecs;
}

int dw_obj_load_section(void *obj, Dwarf_Half idx, Dwarf_Small **data, int *err)
{
	struct dw_obj *o = obj;
	struct dw_section *s;
	uint64_t rawsize = 0;

	if (idx >= o->do_nsecs || o->do_secs[idx].ds_kind == DS_NONE)
		return DW_DLV_NO_ENTRY;
	s = &o->do_secs[idx];
	if (!s->ds_data && !s->ds_failed) {
		if (s->ds_kind == DS_PLAIN) {
			s->ds_data = (Dwarf_Small *)raw_section(o, s->ds_scn, &rawsize);
			if (rawsize != s->ds_size)
				s->ds_data = NULL;
		} else {
			inflate_section(o, s);
		}
		s->ds_failed = !s->ds_data;
	}
	if (!s->ds_data) {
		*err = DW_DLE_SECTION_ERROR;
		return DW_DLV_ERROR;
	}
	*data = s->ds_data;
	return DW_DLV_OK;
}

const Dwarf_Obj_Access_Methods dw_obj_methods = {
	.get_section_info = obj_section_info,
	.get_byte_order = obj_byte_order,
	.get_length_size = obj_length_size,
	.get_pointer_size = obj_pointer_size,
	.get_section_count = obj_section_count,
	.load_section = dw_obj_load_section,
	.relocate_a_section = NULL,
};

/* Sections we read; libdwarf is not shown the others (location lists,
 * frames, macros, indexes...), which saves inflating them and keeps its
 * parsers of them out of reach of hostile files. */
static int wanted_section(const char *name)
{
	static const char *const wanted[] = {
		".debug_info",     ".debug_abbrev", ".debug_line",
		".debug_line_str", ".debug_str",    ".debug_str_offsets",
		".debug_addr",     ".debug_ranges", ".debug_rnglists",
	};

	for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++)
		if (strcmp(name, wanted[i]) == 0)
			return 1;
	return 0;
}

/* rnglists_ok: every unit header of a .debug_rnglists section reads
 * cleanly.  libdwarf 20210528 reads them all as soon as .debug_info is
 * loaded, and on a header it cannot read frees its list of headers and
 * goes on using it (a double free): such a section is not shown to it. */
static int rnglists_ok(const struct dw_obj *o, const uint8_t *p, uint64_t size)
{
	uint64_t off = 0;

	while (off < size) {
		uint64_t len, hdr = 4;

		if (size - off < 4)
			return 0;
		len = dw_load_end(o, p + off, 4);
		if (len >= 0xfffffff0u) {
			if (len != 0xffffffffu || size - off < 12)
				return 0;
			len = dw_load_end(o, p + off + 4, 8);
			hdr = 12;
		}
		/* version 5, address size, selector size, offset count */
		if (len < 8 || len > size - off - hdr)
			return 0;
		if (dw_load_end(o, p + off + hdr, 2) != 5)
			return 0;
		if (p[off + hdr + 2] != 2 && p[off + hdr + 2] != 4 && p[off + hdr + 2] != 8)
			return 0;
		off += hdr + len;
	}
	return 1;
}

/* skip_uleb: past a LEB128 number in [*off, end); 0 if it runs out. */
static int skip_uleb(const uint8_t *p, uint64_t *off, uint64_t end, uint64_t *v)
{
	uint64_t r = 0;

	for (unsigned shift = 0; *off < end; shift += 7) {
		uint8_t byte = p[(*off)++];

		if (shift < 64)
			r |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			if (v)
				*v = r;
			return 1;
		}
	}
	return 0;
}

/* skip_form: past one DWARF 5 line header entry field; 0 for a form that
 * has no place there or runs out. */
static int skip_form(const uint8_t *p, uint64_t *off, uint64_t end, uint64_t form,
		     unsigned offset_size)
{
	uint64_t n = 0;

	switch (form) {
	case DW_FORM_string:
		while (*off < end && p[*off])
			(*off)++;
		n = 1;
		break;
	case DW_FORM_line_strp:
	case DW_FORM_strp:
	case DW_FORM_sec_offset:
		n = offset_size;
		break;
	case DW_FORM_udata:
	case DW_FORM_strx:
		return skip_uleb(p, off, end, NULL);
	case DW_FORM_data1:
	case DW_FORM_strx1:
		n = 1;
		break;
	case DW_FORM_data2:
	case DW_FORM_strx2:
		n = 2;
		break;
	case DW_FORM_strx3:
		n = 3;
		break;
	case DW_FORM_data4:
	case DW_FORM_strx4:
		n = 4;
		break;
	case DW_FORM_data8:
		n = 8;
		break;
	case DW_FORM_data16:
		n = 16;
		break;
	case DW_FORM_block:
		if (!skip_uleb(p, off, end, &n))
			return 0;
		break;
	default:
		return 0;
	}
	if (end - *off < n)
		return 0;
	*off += n;
	return 1;
}

/* entry_table_ok: a DWARF 5 directory or file name table: its format,
 * then count entries, each at least a byte, inside the header. */
static int entry_table_ok(const uint8_t *p, uint64_t *off, uint64_t end, unsigned offset_size)
{
	uint64_t forms[2 * 16], count = 0;
	unsigned nformats;

	if (*off >= end)
		return 0;
	nformats = p[(*off)++];
	if (nformats > 16)
		return 0;
	for (unsigned i = 0; i < nformats; i++)
		if (!skip_uleb(p, off, end, &forms[2 * i]) ||
		    !skip_uleb(p, off, end, &forms[2 * i + 1]))
			return 0;
	if (!skip_uleb(p, off, end, &count))
		return 0;
	if (count && (!nformats || count > end - *off))
		return 0;
	for (uint64_t k = 0; k < count; k++)
		for (unsigned i = 0; i < nformats; i++)
			if (!skip_form(p, off, end, forms[2 * i + 1], offset_size))
				return 0;
	return 1;
}

/* debug_line_ok: every line table header of .debug_line reads cleanly up
 * to its file names.  libdwarf 20210528 sizes its tables by the counts a
 * DWARF 5 header gives before checking them against the data, so a
 * header claiming 2^60 entries of no bytes each made it ask for exabytes:
 * such a section is not shown to it. */
static int debug_line_ok(const struct dw_obj *o, const uint8_t *p, uint64_t size)
{
	uint64_t off = 0;

	while (off < size) {
		uint64_t len, end, hlen, hdr_end, version;
		unsigned offset_size = 4, opcode_base;

		if (size - off < 4)
			return 0;
		len = dw_load_end(o, p + off, 4);
		off += 4;
		if (len >= 0xfffffff0u) {
			if (len != 0xffffffffu || size - off < 8)
				return 0;
			len = dw_load_end(o, p + off, 8);
			off += 8;
			offset_size = 8;
		}
		if (len > size - off || len < 2)
			return 0;
		end = off + len;
		version = dw_load_end(o, p + off, 2);
		off += 2;
		if (version < 2 || version > 5)
			return 0;
		if (version >= 5)
			off += 2; /* address size, segment selector size */
		if (end - off < offset_size)
			return 0;
		hlen = dw_load_end(o, p + off, (int)offset_size);
		off += offset_size;
		if (hlen > end - off)
			return 0;
		hdr_end = off + hlen;
		/* min_inst_length, [max_ops], default_is_stmt, line_base,
		 * line_range, opcode_base, standard_opcode_lengths */
		off += version >= 4 ? 6 : 5;
		if (off > hdr_end)
			return 0;
		opcode_base = p[off - 1];
		if (opcode_base == 0 || opcode_base - 1 > hdr_end - off)
			return 0;
		off += opcode_base - 1;
		if (version >= 5 && (!entry_table_ok(p, &off, hdr_end, offset_size) ||
				     !entry_table_ok(p, &off, hdr_end, offset_size)))
			return 0;
		off = end;
	}
	return 1;
}

/* obj_init: the debug sections of elf.  -ENOENT without any. */
int dw_obj_init(struct dw_obj *o, Elf *elf, uint64_t file_size)
{
	size_t nsecs, shstrndx, found = 0;
	GElf_Ehdr eh;

	memset(o, 0, sizeof(*o));
	o->do_file_size = file_size;
	if (!gelf_getehdr(elf, &eh) || eh.e_type == ET_REL)
		return -ENOENT;
	o->do_is64 = eh.e_ident[EI_CLASS] == ELFCLASS64;
	o->do_msb = eh.e_ident[EI_DATA] == ELFDATA2MSB;
	if (elf_getshdrnum(elf, &nsecs) != 0 || elf_getshdrstrndx(elf, &shstrndx) != 0 ||
	    nsecs == 0)
		return -ENOENT;
	/* libdwarf numbers sections with a Dwarf_Half */
	if (nsecs > 0xffff || nsecs > file_size / 40)
		return -ENOENT;
	o->do_secs = calloc(nsecs, sizeof(*o->do_secs));
	if (!o->do_secs)
		return -ENOMEM;
	o->do_nsecs = nsecs;
	for (size_t i = 1; i < nsecs; i++) {
		struct dw_section *s = &o->do_secs[i];
		Elf_Scn *scn = elf_getscn(elf, i);
		const char *name;
		GElf_Shdr sh;

		s->ds_name = "";
		if (!scn || !gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		s->ds_scn = scn;
		if (strncmp(name, ".debug_", 7) == 0) {
			s->ds_name = name;
			s->ds_kind = sh.sh_flags & SHF_COMPRESSED ? DS_SHF : DS_PLAIN;
		} else if (strncmp(name, ".zdebug_", 8) == 0 &&
			   strlen(name) < sizeof(s->ds_namebuf)) {
			snprintf(s->ds_namebuf, sizeof(s->ds_namebuf), ".%s", name + 2);
			s->ds_name = s->ds_namebuf;
			s->ds_kind = DS_ZDEBUG;
		} else {
			continue;
		}
		settle_section_size(o, s);
		if (!wanted_section(s->ds_name))
			s->ds_kind = DS_NONE;
		if (s->ds_kind != DS_NONE && strcmp(s->ds_name, ".debug_addr") == 0)
			o->do_addr = i;
		if (s->ds_kind != DS_NONE && strcmp(s->ds_name, ".debug_ranges") == 0)
			o->do_ranges = i;
		if (s->ds_kind != DS_NONE && strcmp(s->ds_name, ".debug_line") == 0) {
			Dwarf_Small *data = NULL;
			int lerr = 0;

			if (dw_obj_load_section(o, (Dwarf_Half)i, &data, &lerr) != DW_DLV_OK ||
			    !debug_line_ok(o, data, s->ds_size))
				s->ds_kind = DS_NONE;
		}
		if (s->ds_kind != DS_NONE && strcmp(s->ds_name, ".debug_rnglists") == 0) {
			Dwarf_Small *data = NULL;
			int lerr = 0;

			/* loaded (inflated) now, to be checked */
			if (dw_obj_load_section(o, (Dwarf_Half)i, &data, &lerr) != DW_DLV_OK ||
			    !rnglists_ok(o, data, s->ds_size))
				s->ds_kind = DS_NONE;
			else
				o->do_rnglists = i;
		}
		if (s->ds_kind != DS_NONE)
			found++;
	}
	return found ? 0 : -ENOENT;
}

void dw_obj_fini(struct dw_obj *o)
{
	for (size_t i = 0; i < o->do_nsecs; i++)
		if (o->do_secs[i].ds_owned)
			free(o->do_secs[i].ds_data);
	free(o->do_secs);
}
