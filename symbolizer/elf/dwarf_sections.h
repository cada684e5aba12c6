/* dwarf_sections.h: the sections of one ELF file as libdwarf reads them
 * (dwarf_sections.c): libdwarf's object access interface on top of the
 * libelf handle the caller validated.  Sections are served from the
 * mapped file, checked against its size; compressed ones (SHF_COMPRESSED
 * with zlib, or the older .zdebug_* form) are inflated into buffers whose
 * size is bounded by the compressed size; the line and range sections
 * are checked before libdwarf sees them.  Private to symbolizer/elf/:
 * dwarf.c walks what these serve.  One thread per struct dw_obj. */
#ifndef FP_DWARF_SECTIONS_H
#define FP_DWARF_SECTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <libelf.h>

#if __has_include(<libdwarf/libdwarf.h>)
#include <libdwarf/libdwarf.h>
#else
#include <libdwarf.h>
#endif

/* zlib cannot expand data by more than about 1032:1; a section claiming
 * more is lying about its size. */
#define MAX_INFLATE_RATIO 1100
/* All sections of one file together, once inflated.  libdwarf keeps about
 * 100 bytes per line row of a unit, and a row can take one byte of
 * .debug_line: this bounds what a hostile file can make us allocate. */
#define MAX_DWARF_BYTES (1ull << 30)

#ifndef SHF_COMPRESSED
#define SHF_COMPRESSED (1 << 11)
#endif
#ifndef ELFCOMPRESS_ZLIB
#define ELFCOMPRESS_ZLIB 1
#endif

struct dw_section {
	const char *ds_name; /* as libdwarf sees it: "" for sections not ours */
	char ds_namebuf[32]; /* ".zdebug_x" renamed ".debug_x" */
	uint64_t ds_size;    /* once inflated */
	Elf_Scn *ds_scn;
	int ds_kind; /* DS_PLAIN, DS_SHF, DS_ZDEBUG */
	Dwarf_Small *ds_data;
	int ds_owned;
	int ds_failed;
};

enum { DS_NONE, DS_PLAIN, DS_SHF, DS_ZDEBUG };

struct dw_obj {
	uint64_t do_file_size;
	struct dw_section *do_secs;
	size_t do_nsecs;
	int do_msb, do_is64;
	uint64_t do_inflated;                   /* bytes allocated for inflated sections */
	size_t do_addr, do_ranges, do_rnglists; /* section indexes, 0: none */
};

/* dw_obj_init: o for the DWARF sections of elf (file_size bytes): 0,
 * -ENOMEM, or another negative errno when the file has no usable DWARF.
 * dw_obj_fini frees it, also after a failed init. */
int dw_obj_init(struct dw_obj *o, Elf *elf, uint64_t file_size);
void dw_obj_fini(struct dw_obj *o);
/* dw_obj_load_section: section idx's bytes (inflated) in *data; libdwarf's
 * load_section, also used for the range sections read directly. */
int dw_obj_load_section(void *obj, Dwarf_Half idx, Dwarf_Small **data, int *err);
/* dw_load_end: n bytes at p as a number, in the file's byte order. */
uint64_t dw_load_end(const struct dw_obj *o, const uint8_t *p, int n);
/* The methods of libdwarf's object access interface over a struct dw_obj. */
extern const Dwarf_Obj_Access_Methods dw_obj_methods;

#endif
