/* cfi.c: .eh_frame and .debug_frame to unwind table rows.
 *
 * Three steps, each bounded by the bytes it reads:
 *  1. walk every CIE/FDE entry of both sections and keep, for each FDE
 *     whose code lies in an executable PT_LOAD segment, its range as file
 *     offsets and where its instructions are;
 *  2. sort those by start, .eh_frame first where both describe the same
 *     code (it is what the unwinder of the process itself uses);
 *  3. run each FDE's CIE and FDE instructions (the DWARF call frame
 *     instructions, as the DWARF 5 spec section 6.4 and the LSB's .eh_frame
 *     chapter define them) and turn every location's register rules into a
 *     row, or INVALID where the rules say something a row cannot.
 * Anything malformed ends an FDE with an INVALID row, or drops the FDE when
 * even its range cannot be trusted; it never fails the file.
 */
#include "cfi.h"
#include "elfinit.h"
#include "elfnote.h"
#include "pyinterp.h"
#include "unwind_table.h"
#include "vec.h"

#include <endian.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

/* DWARF register numbers (x86-64 psABI, AArch64 DWARF ABI). */
#define X86_RBP 6
#define X86_RSP 7
#define X86_RA 16
#define ARM64_X29 29
#define ARM64_X30 30
#define ARM64_SP 31

#define MAX_REMEMBER 32    /* DW_CFA_remember_state depth; GCC nests 2 or 3 */
#define MAX_CIE_INSNS 1024 /* a CIE's initial instructions: real ones take a dozen bytes */
#define CIE_CACHE 16       /* CIEs parsed and run, direct-mapped by offset */
#define MAX_SEGS 64        /* PT_LOAD segments looked at */
#define MAX_ALIGN 0x10000  /* code and data alignment factors: real ones are 1, 4 or -8 */
#define MAX_DEBUG_FRAME (256u << 20) /* a compressed .debug_frame's size once inflated */

/* The frame-pointer heuristic (see fp_cfi_compile_stats). */
#define FP_SHARE_PERCENT 90
#define FP_MIN_FDES 16

enum reg_kind { REG_SAME = 0, REG_UNDEF, REG_OFFSET, REG_VAL_OFFSET, REG_REGISTER, REG_EXPR };
enum cfa_kind { CFA_REG = 0, CFA_PLT, CFA_SIGNAL, CFA_OTHER_EXPR, CFA_BAD };

struct reg_rule {
	uint8_t rr_kind;
	int64_t rr_off;
};

/* The rules a row can say anything about: the CFA, the return address
 * column and the frame pointer.  Other registers' rules are read and
 * dropped, which keeps remember_state copies small. */
struct cfa_state {
	uint8_t cs_cfa; /* enum cfa_kind */
	uint32_t cs_cfa_reg;
	int64_t cs_cfa_off;
	struct reg_rule cs_ra;
	struct reg_rule cs_fp;
};

struct cfi_section {
	const uint8_t *se_data;
	size_t se_size;
	uint64_t se_addr;
	int se_eh; /* .eh_frame (else .debug_frame) */
};

struct cie {
	uint64_t ci_code_align;
	int64_t ci_data_align;
	uint32_t ci_ra;
	uint8_t ci_fde_enc;
	uint8_t ci_has_z;
	uint8_t ci_signal;
	const uint8_t *ci_insns, *ci_insns_end;
};

/* A CIE, parsed once, with the rules its initial instructions set. */
struct cie_entry {
	uint64_t ce_off;
	uint32_t ce_sec;
	int ce_used;
	int ce_ok;
	struct cie ce_cie;
	struct cfa_state ce_init;
};

struct segment {
	uint64_t sg_vaddr, sg_offset, sg_filesz;
	int sg_exec;
};

struct fde_ref {
	uint64_t fr_start, fr_end; /* file offsets */
	uint64_t fr_vstart;        /* the virtual address of fr_start */
	const uint8_t *fr_insns, *fr_insns_end;
	uint64_t fr_cie; /* offset of its CIE in its section */
	uint32_t fr_sec;
	uint32_t fr_entry; /* offset of the FDE: a stable sort */
};

struct loc_row {
	uint64_t lr_loc; /* virtual address */
	struct fp_unwind_row lr_row;
};

struct cfi_ctx {
	const uint8_t *cx_raw;
	size_t cx_rawsize;
	uint8_t cx_arch;
	struct segment cx_segs[MAX_SEGS];
	size_t cx_nsegs;
	uint64_t cx_got, cx_text; /* bases of datarel and textrel pointers */
	struct cfi_section cx_secs[2];
	size_t cx_nsecs;
	struct fde_ref *cx_fdes;
	size_t cx_nfdes, cx_fdes_cap;
	struct loc_row *cx_tmp; /* one FDE's rows */
	size_t cx_ntmp, cx_tmp_cap;
	struct fp_unwind_row *cx_rows;
	size_t cx_nrows, cx_rows_cap;
	uint64_t cx_cursor;    /* code up to here has rows */
	uint32_t cx_grow_fdes; /* FDEs that move the CFA off the entry rule */
	uint32_t cx_fp_fdes;   /* of them, those that keep a frame pointer */
	struct fp_cfi_stats cx_stats;
	struct cie_entry cx_cies[CIE_CACHE];
};

static const struct cie_entry *cie_get(struct cfi_ctx *x, uint32_t si, uint64_t off);

/* A cursor over untrusted bytes: reads past the end return 0 and set
 * cu_bad, so a parser checks once after a group of reads. */
struct cur {
	const uint8_t *cu_p, *cu_end;
	int cu_bad;
};

static uint64_t rd_uint(struct cur *c, unsigned n)
{
	uint64_t v = 0;
	unsigned i;

	if (c->cu_bad || (size_t)(c->cu_end - c->cu_p) < n) {
		c->cu_bad = 1;
		return 0;
	}
	for (i = 0; i < n; i++)
		v |= (uint64_t)c->cu_p[i] << (8 * i);
	c->cu_p += n;
	return v;
}

/* rd_leb: a LEB128 number's 7-bit groups, low first; *shift the bits they
 * make and *sign the last byte's sign bit (0x40).  0 and cu_bad when it is
 * cut short or longer than a 64-bit value needs. */
static uint64_t rd_leb(struct cur *c, unsigned *shift, int *sign)
{
	uint64_t v = 0;

	*shift = 0;
	*sign = 0;
	while (!c->cu_bad) {
		uint8_t b;

		if (c->cu_p >= c->cu_end) {
			c->cu_bad = 1;
			break;
		}
		b = *c->cu_p++;
		if (*shift < 64)
			v |= (uint64_t)(b & 0x7f) << *shift;
		*shift += 7;
		if (!(b & 0x80)) {
			*sign = b & 0x40;
			return v;
		}
		if (*shift > 70) /* longer than any 64-bit value needs */
			c->cu_bad = 1;
	}
	return 0;
}

static uint64_t rd_uleb(struct cur *c)
{
	unsigned shift;
	int sign;

	return rd_leb(c, &shift, &sign);
}

static int64_t rd_sleb(struct cur *c)
{
	unsigned shift;
	int sign;
	uint64_t v = rd_leb(c, &shift, &sign);

	if (sign && shift < 64)
		v |= ~0ull << shift;
	return (int64_t)v;
}

/* seg_of: the segment holding virtual address va (executable ones only
 * when exec), or NULL. */
static const struct segment *seg_of(const struct cfi_ctx *x, uint64_t va, int exec)
{
	size_t i;

	for (i = 0; i < x->cx_nsegs; i++) {
		const struct segment *s = &x->cx_segs[i];

		if ((!exec || s->sg_exec) && va >= s->sg_vaddr && va - s->sg_vaddr < s->sg_filesz)
			return s;
	}
	return NULL;
}

/* read_encoded: a pointer in DW_EH_PE encoding enc (LSB, "DWARF Exception
 * Header Encoding").  0, or -EINVAL for encodings that make no sense here
 * (omitted, aligned, function-relative) or bytes that run out. */
static int read_encoded(const struct cfi_ctx *x, const struct cfi_section *sec, struct cur *c,
			uint8_t enc, uint64_t *out)
{
	uint64_t base = 0, v;
	const uint8_t *field = c->cu_p;

	if (enc == 0xff)
		return -EINVAL;
	switch (enc & 0x0f) {
	case 0x00:
		v = rd_uint(c, 8);
		break;
	case 0x01:
		v = rd_uleb(c);
		break;
	case 0x02:
		v = rd_uint(c, 2);
		break;
	case 0x03:
		v = rd_uint(c, 4);
		break;
	case 0x04:
		v = rd_uint(c, 8);
		break;
	case 0x09:
		v = (uint64_t)rd_sleb(c);
		break;
	case 0x0a:
		v = (uint64_t)(int64_t)(int16_t)rd_uint(c, 2);
		break;
	case 0x0b:
		v = (uint64_t)(int64_t)(int32_t)rd_uint(c, 4);
		break;
	case 0x0c:
		v = rd_uint(c, 8);
		break;
	default:
		return -EINVAL;
	}
	if (c->cu_bad)
		return -EINVAL;
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10:
		base = sec->se_addr + (uint64_t)(field - sec->se_data);
		break;
	case 0x20:
		base = x->cx_text;
		break;
	case 0x30:
		base = x->cx_got;
		break;
	default:
		return -EINVAL;
	}
	v += base;
	if (enc & 0x80) {
		/* The pointer is stored at v: read it from the file. */
		const struct segment *s = seg_of(x, v, 0);
		uint64_t at;
		struct cur p;

		if (!s || s->sg_filesz - (v - s->sg_vaddr) < 8)
			return -EINVAL;
		at = s->sg_offset + (v - s->sg_vaddr);
		if (at > x->cx_rawsize || x->cx_rawsize - at < 8)
			return -EINVAL;
		p = (struct cur){ x->cx_raw + at, x->cx_raw + at + 8, 0 };
		v = rd_uint(&p, 8);
	}
	*out = v;
	return 0;
}

/* skip_encoded: skip a pointer of encoding enc without evaluating it
 * (personality routines). */
static int skip_encoded(struct cur *c, uint8_t enc)
{
	switch (enc & 0x0f) {
	case 0x00:
	case 0x04:
	case 0x0c:
		rd_uint(c, 8);
		break;
	case 0x01:
		rd_uleb(c);
		break;
	case 0x09:
		rd_sleb(c);
		break;
	case 0x02:
	case 0x0a:
		rd_uint(c, 2);
		break;
	case 0x03:
	case 0x0b:
		rd_uint(c, 4);
		break;
	default:
		return -EINVAL;
	}
	return c->cu_bad ? -EINVAL : 0;
}

/* entry_at: the CIE or FDE at off of sec: its body after the length
 * field (*body), where the next entry starts (*next), and whether it is
 * in the 64-bit DWARF format.  -ENOENT at the .eh_frame terminator,
 * -EINVAL when the length does not fit. */
static int entry_at(const struct cfi_section *sec, uint64_t off, struct cur *body, uint64_t *next,
		    int *is64)
{
	struct cur c;
	uint64_t len;

	if (off >= sec->se_size)
		return -EINVAL;
	c = (struct cur){ sec->se_data + off, sec->se_data + sec->se_size, 0 };
	len = rd_uint(&c, 4);
	*is64 = len == 0xffffffffu;
	if (*is64)
		len = rd_uint(&c, 8);
	if (c.cu_bad)
		return -EINVAL;
	if (len == 0)
		return sec->se_eh ? -ENOENT : -EINVAL;
	if (len > (uint64_t)(c.cu_end - c.cu_p))
		return -EINVAL;
	body->cu_p = c.cu_p;
	body->cu_end = c.cu_p + len;
	body->cu_bad = 0;
	*next = (uint64_t)(body->cu_end - sec->se_data);
	return 0;
}

/* entry_id: read the CIE id / CIE pointer field; whether this entry is a
 * CIE, and for an FDE the offset of its CIE. */
static int entry_id(const struct cfi_section *sec, struct cur *body, int is64, uint64_t *cie_off)
{
	const uint8_t *field = body->cu_p;
	uint64_t id;

	if (sec->se_eh) {
		/* .eh_frame: 0 for a CIE, else the distance back to it. */
		id = rd_uint(body, 4);
		if (body->cu_bad)
			return -EINVAL;
		if (id == 0)
			return 1;
		if (id > (uint64_t)(field - sec->se_data))
			return -EINVAL;
		*cie_off = (uint64_t)(field - sec->se_data) - id;
		return 0;
	}
	id = rd_uint(body, is64 ? 8 : 4);
	if (body->cu_bad)
		return -EINVAL;
	if (id == (is64 ? ~0ull : 0xffffffffull))
		return 1;
	*cie_off = id;
	return 0;
}

static int parse_cie(const struct cfi_section *sec, uint64_t off, struct cie *ci)
{
	struct cur c;
	uint64_t next, unused;
	const char *aug;
	size_t aug_len;
	uint8_t version;
	int is64, err;

	if ((err = entry_at(sec, off, &c, &next, &is64)))
		return -EINVAL;
	if (entry_id(sec, &c, is64, &unused) != 1)
		return -EINVAL;
	memset(ci, 0, sizeof(*ci));
	version = (uint8_t)rd_uint(&c, 1);
	if (c.cu_bad || (version != 1 && version != 3 && version != 4))
		return -EINVAL;
	aug = (const char *)c.cu_p;
	aug_len = strnlen(aug, (size_t)(c.cu_end - c.cu_p));
	if (aug_len == (size_t)(c.cu_end - c.cu_p))
		return -EINVAL;
	c.cu_p += aug_len + 1;
	/* Without 'z' an augmentation says nothing of its own size. */
	if (aug_len && aug[0] != 'z')
		return -EINVAL;
	if (version == 4) {
		uint8_t addr_size = (uint8_t)rd_uint(&c, 1), seg_size = (uint8_t)rd_uint(&c, 1);
		if (addr_size != 8 || seg_size != 0)
			return -EINVAL;
	}
	ci->ci_code_align = rd_uleb(&c);
	ci->ci_data_align = rd_sleb(&c);
	ci->ci_ra = version == 1 ? (uint32_t)rd_uint(&c, 1) : (uint32_t)rd_uleb(&c);
	if (c.cu_bad || !ci->ci_code_align || ci->ci_code_align > MAX_ALIGN ||
	    ci->ci_data_align > MAX_ALIGN || ci->ci_data_align < -MAX_ALIGN)
		return -EINVAL;
	ci->ci_fde_enc = 0; /* absolute 8-byte addresses unless 'R' says otherwise */
	if (aug_len) {
		uint64_t zlen = rd_uleb(&c);
		struct cur z;
		size_t i;

		if (c.cu_bad || zlen > (uint64_t)(c.cu_end - c.cu_p))
			return -EINVAL;
		z = (struct cur){ c.cu_p, c.cu_p + zlen, 0 };
		c.cu_p += zlen;
		ci->ci_has_z = 1;
		for (i = 1; i < aug_len; i++) {
			switch (aug[i]) {
			case 'L':
				rd_uint(&z, 1);
				break;
			case 'P': {
				uint8_t enc = (uint8_t)rd_uint(&z, 1);
				if (skip_encoded(&z, enc))
					return -EINVAL;
				break;
			}
			case 'R':
				ci->ci_fde_enc = (uint8_t)rd_uint(&z, 1);
				break;
			case 'S':
				ci->ci_signal = 1;
				break;
			case 'B': /* AArch64 pointer authentication with the B key */
			case 'G': /* AArch64 memory tagging */
				break;
			default:
				/* Unknown letters: 'z' lets us skip their data. */
				i = aug_len;
			}
			if (z.cu_bad)
				return -EINVAL;
		}
	}
	if (!sec->se_eh)
		ci->ci_fde_enc = 0; /* .debug_frame addresses are plain target addresses */
	ci->ci_insns = c.cu_p;
	ci->ci_insns_end = c.cu_end;
	/* Run for every FDE (once per cache miss): bounded. */
	return c.cu_end - c.cu_p > MAX_CIE_INSNS ? -EINVAL : 0;
}

/* collect: step 1 for one section. */
static int collect(struct cfi_ctx *x, uint32_t si)
{
	const struct cfi_section *sec = &x->cx_secs[si];
	uint64_t off = 0, next;

	/* Each entry takes at least 4 bytes: the loop ends. */
	while (off < sec->se_size) {
		uint64_t cie_off = 0, vstart, vlen;
		const struct cie_entry *ce;
		const struct segment *s;
		struct fde_ref *f;
		struct cur c;
		int is64, kind, err;

		err = entry_at(sec, off, &c, &next, &is64);
		if (err)
			break; /* terminator, or a length that cannot be trusted */
		kind = entry_id(sec, &c, is64, &cie_off);
		if (kind == 1)
			goto next_entry; /* a CIE: parsed when an FDE names it */
		ce = kind == 0 ? cie_get(x, si, cie_off) : NULL;
		if (!ce || read_encoded(x, sec, &c, ce->ce_cie.ci_fde_enc, &vstart) ||
		    read_encoded(x, sec, &c, ce->ce_cie.ci_fde_enc & 0x0f, &vlen))
			goto next_entry;
		if (ce->ce_cie.ci_has_z) {
			uint64_t zlen = rd_uleb(&c);
			if (c.cu_bad || zlen > (uint64_t)(c.cu_end - c.cu_p))
				goto next_entry;
			c.cu_p += zlen;
		}
		if (!vlen)
			goto next_entry;
		s = seg_of(x, vstart, 1);
		if (!s)
			goto next_entry;
		/* Clip to the segment: the table describes file-backed code. */
		if (vlen > s->sg_filesz - (vstart - s->sg_vaddr))
			vlen = s->sg_filesz - (vstart - s->sg_vaddr);
		if (x->cx_nfdes >= FP_UNWIND_MAX_ROWS)
			return -E2BIG;
		if (fp_vec_reserve(&x->cx_fdes, &x->cx_fdes_cap, x->cx_nfdes + 1, sizeof(*f)))
			return -ENOMEM;
		f = &x->cx_fdes[x->cx_nfdes++];
		f->fr_vstart = vstart;
		f->fr_start = s->sg_offset + (vstart - s->sg_vaddr);
		f->fr_end = f->fr_start + vlen;
		f->fr_insns = c.cu_p;
		f->fr_insns_end = c.cu_end;
		f->fr_cie = cie_off;
		f->fr_sec = si;
		f->fr_entry = (uint32_t)off;
next_entry:
		off = next;
	}
	return 0;
}

static int fde_cmp(const void *a, const void *b)
{
	const struct fde_ref *l = a, *r = b;

	if (l->fr_start != r->fr_start)
		return l->fr_start < r->fr_start ? -1 : 1;
	if (l->fr_sec != r->fr_sec)
		return l->fr_sec < r->fr_sec ? -1 : 1;
	return l->fr_entry < r->fr_entry ? -1 : l->fr_entry > r->fr_entry;
}

/* The two expressions our rows have a rule for (x86-64).  The PLT's, as
 * binutils writes it for 16-byte lazy PLT entries: rsp + 8, plus 8 more
 * once the entry's push has run, i.e. from byte 11 of the entry on:
 *   DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_lit11;
 *   DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * glibc's __restore_rt: the CFA is the saved rsp in the ucontext that the
 * kernel put at rsp (uc_mcontext.rsp is at 160):
 *   DW_OP_breg7 160; DW_OP_deref */
static const uint8_t plt_expr[] = {
	0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22
};
static const uint8_t sigreturn_expr[] = { 0x77, 0xa0, 0x01, 0x06 };

static uint8_t classify_expr(const struct cfi_ctx *x, const uint8_t *p, uint64_t len)
{
	if (x->cx_arch != FP_UNWIND_ARCH_X86_64)
		return CFA_OTHER_EXPR;
	if (len == sizeof(plt_expr) && !memcmp(p, plt_expr, sizeof(plt_expr)))
		return CFA_PLT;
	if (len == sizeof(sigreturn_expr) && !memcmp(p, sigreturn_expr, sizeof(sigreturn_expr)))
		return CFA_SIGNAL;
	return CFA_OTHER_EXPR;
}

/* slot_of: a rule "saved at CFA + off" as a count of 8-byte words in
 * [lo, hi], not 0 (0 means "not saved"); -1 when it is not one. */
static int slot_of(const struct reg_rule *rr, int lo, int hi, int8_t *slot)
{
	if (rr->rr_kind != REG_OFFSET || rr->rr_off % 8 || rr->rr_off / 8 < lo ||
	    rr->rr_off / 8 > hi || rr->rr_off == 0)
		return -1;
	*slot = (int8_t)(rr->rr_off / 8);
	return 0;
}

/* to_row: the row of one location's rules. */
static struct fp_unwind_row to_row(const struct cfi_ctx *x, const struct cie *ci,
				   const struct cfa_state *st)
{
	int arm = x->cx_arch == FP_UNWIND_ARCH_ARM64;
	uint32_t sp = arm ? ARM64_SP : X86_RSP, fpreg = arm ? ARM64_X29 : X86_RBP;
	struct fp_unwind_row row = { 0 };
	const struct reg_rule *ra = &st->cs_ra, *fp = &st->cs_fp;
	uint8_t rule;
	int8_t ra_slot = 0, fp_slot = 0;

	if (ra->rr_kind == REG_UNDEF) {
		row.ur_rule = FP_UNWIND_STOP;
		return row;
	}
	if (ci->ci_signal || st->cs_cfa == CFA_SIGNAL) {
		row.ur_rule = FP_UNWIND_SIGNAL;
		return row;
	}
	if (st->cs_cfa == CFA_PLT) {
		row.ur_rule = FP_UNWIND_PLT;
		return row;
	}
	row.ur_rule = FP_UNWIND_INVALID;
	if (st->cs_cfa != CFA_REG || (st->cs_cfa_reg != sp && st->cs_cfa_reg != fpreg))
		return row;
	if (st->cs_cfa_off < 0 || st->cs_cfa_off % 8 || st->cs_cfa_off / 8 > 0xffff)
		return row;
	rule = st->cs_cfa_reg == sp ? FP_UNWIND_SP : FP_UNWIND_FP;
	if (arm) {
		/* The return address is in x30 until it is saved. */
		if (ci->ci_ra != ARM64_X30)
			return row;
		if (ra->rr_kind != REG_SAME && slot_of(ra, -8, 7, &ra_slot))
			return row;
	} else if (ci->ci_ra != X86_RA || ra->rr_kind != REG_OFFSET || ra->rr_off != -8) {
		return row;
	}
	if (fp->rr_kind != REG_SAME && fp->rr_kind != REG_UNDEF && slot_of(fp, -128, 127, &fp_slot))
		return row;
	row.ur_cfa = (uint16_t)(st->cs_cfa_off / 8);
	row.ur_rule = (uint8_t)(rule | (uint8_t)((uint8_t)ra_slot << 4));
	row.ur_fp = fp_slot;
	return row;
}

static int emit_tmp(struct cfi_ctx *x, uint64_t loc, struct fp_unwind_row row)
{
	if (x->cx_ntmp && x->cx_tmp[x->cx_ntmp - 1].lr_loc == loc) {
		x->cx_tmp[x->cx_ntmp - 1].lr_row = row;
		return 0;
	}
	if (fp_vec_reserve(&x->cx_tmp, &x->cx_tmp_cap, x->cx_ntmp + 1, sizeof(*x->cx_tmp)))
		return -ENOMEM;
	x->cx_tmp[x->cx_ntmp++] = (struct loc_row){ loc, row };
	return 0;
}

/* scaled: v * factor for an offset; a product that does not fit is an
 * odd value, which no row accepts. */
static int64_t scaled(int64_t v, int64_t factor)
{
	int64_t r;

	return __builtin_mul_overflow(v, factor, &r) ? INT64_MIN + 1 : r;
}

/* uscaled: the same for an unsigned operand, negated when neg. */
static int64_t uscaled(uint64_t v, int64_t factor, int neg)
{
	if (v > INT64_MAX)
		return INT64_MIN + 1;
	return scaled(neg ? -(int64_t)v : (int64_t)v, factor);
}

static uint64_t fp_column(const struct cfi_ctx *x)
{
	return x->cx_arch == FP_UNWIND_ARCH_ARM64 ? ARM64_X29 : X86_RBP;
}

static void set_reg(const struct cfi_ctx *x, const struct cie *ci, struct cfa_state *st,
		    uint64_t reg, uint8_t kind, int64_t off)
{
	if (reg == ci->ci_ra)
		st->cs_ra = (struct reg_rule){ kind, off };
	if (reg == fp_column(x))
		st->cs_fp = (struct reg_rule){ kind, off };
}

/* restore: DW_CFA_restore*: reg's rule as the CIE left it (init NULL:
 * inside the CIE itself, where it means nothing). */
static void restore(const struct cfi_ctx *x, const struct cie *ci, struct cfa_state *st,
		    const struct cfa_state *init, uint64_t reg)
{
	if (!init)
		return;
	if (reg == ci->ci_ra)
		st->cs_ra = init->cs_ra;
	if (reg == fp_column(x))
		st->cs_fp = init->cs_fp;
}

/* run: execute instructions [p, end) on st.  With emit, a row goes out for
 * each location the code advances past, and for the last one; locations
 * at or beyond end_loc end the program.  init holds the CIE's rules for
 * DW_CFA_restore (NULL while running the CIE itself). */
static int run(struct cfi_ctx *x, const struct cie *ci, const struct cfi_section *sec,
	       const uint8_t *p, const uint8_t *end, struct cfa_state *st,
	       const struct cfa_state *init, uint64_t loc, uint64_t end_loc, int emit)
{
	struct cfa_state *stack = NULL;
	size_t depth = 0;
	struct cur c = { p, end, 0 };
	int err = 0, done = 0;

	while (!done && c.cu_p < c.cu_end) {
		uint8_t op = (uint8_t)rd_uint(&c, 1);
		uint64_t reg = 0, delta = 0, len, new_loc;
		int advance = 0;

		switch (op & 0xc0) {
		case 0x40: /* DW_CFA_advance_loc */
			delta = op & 0x3f;
			advance = 1;
			break;
		case 0x80: /* DW_CFA_offset */
			set_reg(x, ci, st, op & 0x3f, REG_OFFSET,
				uscaled(rd_uleb(&c), ci->ci_data_align, 0));
			break;
		case 0xc0: /* DW_CFA_restore */
			restore(x, ci, st, init, op & 0x3f);
			break;
		default:
			switch (op) {
			case 0x00: /* DW_CFA_nop */
				break;
			case 0x01: /* DW_CFA_set_loc */
				if (read_encoded(x, sec, &c, ci->ci_fde_enc, &new_loc) ||
				    new_loc < loc) {
					c.cu_bad = 1;
					break;
				}
				delta = (new_loc - loc) / ci->ci_code_align;
				advance = 1;
				break;
			case 0x02:
				delta = rd_uint(&c, 1);
				advance = 1;
				break;
			case 0x03:
				delta = rd_uint(&c, 2);
				advance = 1;
				break;
			case 0x04:
				delta = rd_uint(&c, 4);
				advance = 1;
				break;
			case 0x05: /* DW_CFA_offset_extended */
				reg = rd_uleb(&c);
				set_reg(x, ci, st, reg, REG_OFFSET,
					uscaled(rd_uleb(&c), ci->ci_data_align, 0));
				break;
			case 0x06: /* DW_CFA_restore_extended */
				restore(x, ci, st, init, rd_uleb(&c));
				break;
			case 0x07:
				set_reg(x, ci, st, rd_uleb(&c), REG_UNDEF, 0);
				break;
			case 0x08:
				set_reg(x, ci, st, rd_uleb(&c), REG_SAME, 0);
				break;
			case 0x09: /* DW_CFA_register */
				reg = rd_uleb(&c);
				rd_uleb(&c);
				set_reg(x, ci, st, reg, REG_REGISTER, 0);
				break;
			case 0x0a: /* DW_CFA_remember_state */
				if (depth == MAX_REMEMBER) {
					c.cu_bad = 1;
					break;
				}
				if (!stack && !(stack = malloc(MAX_REMEMBER * sizeof(*stack)))) {
					err = -ENOMEM;
					done = 1;
					break;
				}
				stack[depth++] = *st;
				break;
			case 0x0b: /* DW_CFA_restore_state */
				if (!depth) {
					c.cu_bad = 1;
					break;
				}
				*st = stack[--depth];
				break;
			case 0x0c: /* DW_CFA_def_cfa */
				st->cs_cfa = CFA_REG;
				st->cs_cfa_reg = (uint32_t)rd_uleb(&c);
				st->cs_cfa_off = uscaled(rd_uleb(&c), 1, 0);
				break;
			case 0x0d: /* DW_CFA_def_cfa_register */
				st->cs_cfa_reg = (uint32_t)rd_uleb(&c);
				if (st->cs_cfa != CFA_REG)
					st->cs_cfa = CFA_BAD; /* an offset from an expression */
				break;
			case 0x0e: /* DW_CFA_def_cfa_offset */
				st->cs_cfa_off = uscaled(rd_uleb(&c), 1, 0);
				if (st->cs_cfa != CFA_REG)
					st->cs_cfa = CFA_BAD;
				break;
			case 0x0f: /* DW_CFA_def_cfa_expression */
				len = rd_uleb(&c);
				if (c.cu_bad || len > (uint64_t)(c.cu_end - c.cu_p)) {
					c.cu_bad = 1;
					break;
				}
				st->cs_cfa = classify_expr(x, c.cu_p, len);
				c.cu_p += len;
				break;
			case 0x10: /* DW_CFA_expression */
			case 0x16: /* DW_CFA_val_expression */
				reg = rd_uleb(&c);
				len = rd_uleb(&c);
				if (c.cu_bad || len > (uint64_t)(c.cu_end - c.cu_p)) {
					c.cu_bad = 1;
					break;
				}
				c.cu_p += len;
				set_reg(x, ci, st, reg, REG_EXPR, 0);
				break;
			case 0x11: /* DW_CFA_offset_extended_sf */
				reg = rd_uleb(&c);
				set_reg(x, ci, st, reg, REG_OFFSET,
					scaled(rd_sleb(&c), ci->ci_data_align));
				break;
			case 0x12: /* DW_CFA_def_cfa_sf */
				st->cs_cfa = CFA_REG;
				st->cs_cfa_reg = (uint32_t)rd_uleb(&c);
				st->cs_cfa_off = scaled(rd_sleb(&c), ci->ci_data_align);
				break;
			case 0x13: /* DW_CFA_def_cfa_offset_sf */
				st->cs_cfa_off = scaled(rd_sleb(&c), ci->ci_data_align);
				if (st->cs_cfa != CFA_REG)
					st->cs_cfa = CFA_BAD;
				break;
			case 0x14: /* DW_CFA_val_offset */
				reg = rd_uleb(&c);
				set_reg(x, ci, st, reg, REG_VAL_OFFSET,
					uscaled(rd_uleb(&c), ci->ci_data_align, 0));
				break;
			case 0x15: /* DW_CFA_val_offset_sf */
				reg = rd_uleb(&c);
				set_reg(x, ci, st, reg, REG_VAL_OFFSET,
					scaled(rd_sleb(&c), ci->ci_data_align));
				break;
			case 0x2d: /* DW_CFA_AARCH64_negate_ra_state; SPARC's window save */
				/* Return addresses are signed: the walker strips the
				 * bits, where the address is does not change. */
				if (x->cx_arch != FP_UNWIND_ARCH_ARM64)
					c.cu_bad = 1;
				break;
			case 0x2e: /* DW_CFA_GNU_args_size: a push, not a frame change */
				rd_uleb(&c);
				break;
			case 0x2f: /* DW_CFA_GNU_negative_offset_extended */
				reg = rd_uleb(&c);
				set_reg(x, ci, st, reg, REG_OFFSET,
					uscaled(rd_uleb(&c), ci->ci_data_align, 1));
				break;
			default:
				/* Operands of unknown size: nothing after can be read. */
				c.cu_bad = 1;
			}
		}
		if (c.cu_bad)
			break;
		if (advance && emit) {
			/* delta * code_align, with both bounded, cannot wrap 64 bits;
			 * the sum can. */
			new_loc = loc + delta * ci->ci_code_align;
			if (new_loc < loc || new_loc >= end_loc) {
				done = 1;
				break;
			}
			if ((err = emit_tmp(x, loc, to_row(x, ci, st))))
				break;
			loc = new_loc;
		}
	}
	free(stack);
	if (err)
		return err;
	if (c.cu_bad)
		st->cs_cfa = CFA_BAD;
	return emit ? emit_tmp(x, loc, to_row(x, ci, st)) : (c.cu_bad ? -EINVAL : 0);
}

static int same_row(const struct fp_unwind_row *a, const struct fp_unwind_row *b)
{
	return a->ur_cfa == b->ur_cfa && a->ur_rule == b->ur_rule && a->ur_fp == b->ur_fp;
}

/* append: one row of the table: a row at the pc of the last replaces it,
 * a row equal to the last is not needed, except at a function's start
 * (keep): the agent folds frames to the start of their row, which must
 * then never lie in another function (device/unwind_maps.h). */
static int append(struct cfi_ctx *x, uint64_t pc, struct fp_unwind_row row, int keep)
{
	struct fp_unwind_row *last = x->cx_nrows ? &x->cx_rows[x->cx_nrows - 1] : NULL;

	if (pc > UINT32_MAX)
		return 0; /* beyond what a row can name: dropped */
	row.ur_pc = (uint32_t)pc;
	if (last && last->ur_pc == pc) {
		*last = row;
		if (!keep && x->cx_nrows >= 2 && same_row(&x->cx_rows[x->cx_nrows - 2], last))
			x->cx_nrows--;
		return 0;
	}
	if (!keep && last && same_row(last, &row))
		return 0;
	if (x->cx_nrows >= FP_UNWIND_MAX_ROWS)
		return -E2BIG;
	if (fp_vec_reserve(&x->cx_rows, &x->cx_rows_cap, x->cx_nrows + 1, sizeof(row)))
		return -ENOMEM;
	x->cx_rows[x->cx_nrows++] = row;
	return 0;
}

/* count_fp: the frame-pointer heuristic's tally for one FDE's rows. */
static void count_fp(struct cfi_ctx *x)
{
	int grows = 0, keeps = 0;
	size_t i;

	for (i = 0; i < x->cx_ntmp; i++) {
		const struct fp_unwind_row *r = &x->cx_tmp[i].lr_row;
		uint8_t rule = FP_UNWIND_RULE(r);

		if (rule == FP_UNWIND_FP)
			grows = keeps = 1;
		else if (rule == FP_UNWIND_SP &&
			 r->ur_cfa > (x->cx_arch == FP_UNWIND_ARCH_ARM64 ? 0 : 1))
			grows = 1;
		/* AArch64 frame record: x29 just below x30, both saved. */
		if (x->cx_arch == FP_UNWIND_ARCH_ARM64 && rule == FP_UNWIND_SP && r->ur_fp &&
		    FP_UNWIND_RA_SLOT(r) == r->ur_fp + 1)
			keeps = 1;
	}
	x->cx_grow_fdes += grows;
	x->cx_fp_fdes += grows && keeps;
}

/* cie_get: the CIE at off of section si, parsed and its initial
 * instructions run; NULL when it is malformed.  Cached: FDEs sorted by
 * address take turns between a few CIEs, and a hostile file must not make
 * each of its FDEs re-read a large one. */
static const struct cie_entry *cie_get(struct cfi_ctx *x, uint32_t si, uint64_t off)
{
	struct cie_entry *ce = &x->cx_cies[(off ^ (off >> 7) ^ si) % CIE_CACHE];
	const struct cfi_section *sec = &x->cx_secs[si];

	if (ce->ce_used && ce->ce_off == off && ce->ce_sec == si)
		return ce->ce_ok ? ce : NULL;
	memset(ce, 0, sizeof(*ce));
	ce->ce_used = 1, ce->ce_off = off, ce->ce_sec = si;
	if (parse_cie(sec, off, &ce->ce_cie))
		return NULL;
	/* Until the CIE says otherwise, registers keep their values (the
	 * DWARF default is "undefined", but every producer we know means
	 * "same value" for the callee-saved ones, and an undefined frame
	 * pointer would make every row INVALID). */
	ce->ce_init.cs_cfa = CFA_BAD;
	if (run(x, &ce->ce_cie, sec, ce->ce_cie.ci_insns, ce->ce_cie.ci_insns_end, &ce->ce_init,
		NULL, 0, 0, 0))
		ce->ce_init.cs_cfa = CFA_BAD;
	ce->ce_ok = 1;
	return ce;
}

/* compile_fde: step 3 for one FDE, merged into the table.  Code already
 * covered by an earlier FDE keeps that FDE's rows. */
static int compile_fde(struct cfi_ctx *x, const struct fde_ref *f)
{
	const struct cfi_section *sec = &x->cx_secs[f->fr_sec];
	const struct cie_entry *ce;
	uint64_t vend = f->fr_vstart + (f->fr_end - f->fr_start);
	struct cfa_state st;
	size_t i;
	int err, kept = 0;

	if (f->fr_end <= x->cx_cursor)
		return 0;
	ce = cie_get(x, f->fr_sec, f->fr_cie);
	if (!ce)
		return 0;
	st = ce->ce_init;
	x->cx_ntmp = 0;
	err = run(x, &ce->ce_cie, sec, f->fr_insns, f->fr_insns_end, &st, &ce->ce_init,
		  f->fr_vstart, vend, 1);
	if (err)
		return err;
	count_fp(x);
	x->cx_stats.cs_fdes++;
	if (x->cx_nrows && f->fr_start > x->cx_cursor &&
	    (err = append(x, x->cx_cursor, (struct fp_unwind_row){ 0 }, 0)))
		return err;
	for (i = 0; i < x->cx_ntmp; i++) {
		/* Rows are at or after fr_vstart and before its end. */
		uint64_t pc = x->cx_tmp[i].lr_loc - f->fr_vstart + f->fr_start;

		/* A row that an earlier FDE's code overlaps only from the cursor on. */
		if (i + 1 < x->cx_ntmp &&
		    x->cx_tmp[i + 1].lr_loc - f->fr_vstart + f->fr_start <= x->cx_cursor)
			continue;
		if (pc < x->cx_cursor)
			pc = x->cx_cursor;
		if ((err = append(x, pc, x->cx_tmp[i].lr_row, !kept)))
			return err;
		kept = 1;
	}
	x->cx_cursor = f->fr_end;
	return 0;
}

/* load_elf: segments, CFI sections and pointer bases of the file. */
static int load_elf(struct cfi_ctx *x, Elf *elf, int *go)
{
	size_t shstrndx, nph, i;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return -EINVAL;
	if (eh.e_machine == EM_X86_64)
		x->cx_arch = FP_UNWIND_ARCH_X86_64;
	else if (eh.e_machine == EM_AARCH64)
		x->cx_arch = FP_UNWIND_ARCH_ARM64;
	else
		return -EINVAL;
	x->cx_raw = (const uint8_t *)elf_rawfile(elf, &x->cx_rawsize);
	if (!x->cx_raw || elf_getphdrnum(elf, &nph) || elf_getshdrstrndx(elf, &shstrndx))
		return -EINVAL;
	for (i = 0; i < nph && x->cx_nsegs < MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    ph.p_offset > x->cx_rawsize || ph.p_filesz > x->cx_rawsize - ph.p_offset)
			continue;
		x->cx_segs[x->cx_nsegs++] = (struct segment){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
							      !!(ph.p_flags & PF_X) };
	}
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		struct cfi_section *sec;
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(name, ".got"))
			x->cx_got = sh.sh_addr;
		else if (!strcmp(name, ".text"))
			x->cx_text = sh.sh_addr;
		else if (!strcmp(name, ".note.go.buildid") || !strcmp(name, ".gopclntab"))
			*go = 1;
		if ((strcmp(name, ".eh_frame") && strcmp(name, ".debug_frame")) ||
		    sh.sh_type == SHT_NOBITS || !sh.sh_size || x->cx_nsecs == 2)
			continue;
		sec = &x->cx_secs[x->cx_nsecs];
		sec->se_eh = name[1] == 'e';
		sec->se_addr = sh.sh_addr;
		if (sh.sh_flags & SHF_COMPRESSED) {
			/* Debug files compress .debug_frame; bound what inflating costs. */
			GElf_Chdr ch;
			Elf_Data *d;

			if (!gelf_getchdr(scn, &ch) || ch.ch_size > MAX_DEBUG_FRAME ||
			    elf_compress(scn, 0, 0) < 0 || !(d = elf_getdata(scn, NULL)) ||
			    !d->d_buf)
				continue;
			sec->se_data = d->d_buf;
			sec->se_size = d->d_size;
		} else {
			if (sh.sh_offset > x->cx_rawsize ||
			    sh.sh_size > x->cx_rawsize - sh.sh_offset)
				continue;
			sec->se_data = x->cx_raw + sh.sh_offset;
			sec->se_size = sh.sh_size;
		}
		x->cx_stats.cs_cfi_bytes += sec->se_size;
		x->cx_nsecs++;
	}
	/* .eh_frame first: it wins where both describe the same code. */
	if (x->cx_nsecs == 2 && !x->cx_secs[0].se_eh) {
		struct cfi_section t = x->cx_secs[0];
		x->cx_secs[0] = x->cx_secs[1];
		x->cx_secs[1] = t;
	}
	return x->cx_nsecs ? 0 : -ENOENT;
}

/* finish_blob: the table as stored and sent: header, rows and, when py
 * is not NULL, the CPython trailer; little-endian. */
static int finish_blob(struct cfi_ctx *x, int keeps_fp, const struct fp_unwind_cpython *py,
		       void **blob, size_t *len)
{
	struct fp_unwind_header *h;
	struct fp_unwind_row *out;
	size_t size = sizeof(*h) + x->cx_nrows * sizeof(*out), i;

	h = calloc(1, size + (py ? sizeof(*py) : 0));
	if (!h)
		return -ENOMEM;
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = htole16(FP_UNWIND_VERSION);
	h->uh_arch = x->cx_arch;
	h->uh_flags = (keeps_fp ? FP_UNWIND_F_FRAME_POINTERS : 0) | (py ? FP_UNWIND_F_CPYTHON : 0);
	h->uh_nrows = htole32((uint32_t)x->cx_nrows);
	h->uh_fdes = htole32(x->cx_stats.cs_fdes);
	out = (struct fp_unwind_row *)(h + 1);
	for (i = 0; i < x->cx_nrows; i++) {
		out[i] = x->cx_rows[i];
		out[i].ur_pc = htole32(out[i].ur_pc);
		out[i].ur_cfa = htole16(out[i].ur_cfa);
		x->cx_stats.cs_invalid += FP_UNWIND_RULE(&out[i]) == FP_UNWIND_INVALID;
	}
	if (py) {
		struct fp_unwind_cpython le = { 0 };

		le.uc_version = htole32(py->uc_version);
		le.uc_runtime = (int64_t)htole64((uint64_t)py->uc_runtime);
		for (i = 0; i < FP_UNWIND_CPYTHON_RANGES; i++) {
			le.uc_eval[i].start = htole32(py->uc_eval[i].start);
			le.uc_eval[i].end = htole32(py->uc_eval[i].end);
		}
		memcpy(out + x->cx_nrows, &le, sizeof(le));
		size += sizeof(le);
		x->cx_stats.cs_cpython = 1;
	}
	x->cx_stats.cs_rows = (uint32_t)x->cx_nrows;
	*blob = h;
	*len = size;
	return 0;
}

/* The frame-pointer heuristic: Go's toolchain always keeps frame pointers
 * (its sections name it); for other code, when at least FP_SHARE_PERCENT
 * of the FDEs that set up a frame at all (not leaves that leave the CFA
 * where the call put it) define the CFA through the frame pointer at some
 * point (x86-64), or save x29 and x30 as a frame record (arm64), the
 * file was built with frame pointers.  Files of fewer than FP_MIN_FDES
 * such FDEs say too little and are taken as not keeping them. */
int fp_cfi_compile_stats(int fd, void **blob, size_t *len, struct fp_cfi_stats *st)
{
	struct fp_unwind_cpython py;
	struct cfi_ctx x = { 0 };
	uint32_t si;
	int err, go = 0, keeps_fp;
	size_t i;
	Elf *elf;

	if (fp_elf_init())
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	if ((err = load_elf(&x, elf, &go)))
		goto out;
	for (si = 0; si < x.cx_nsecs && !err; si++)
		err = collect(&x, si);
	if (err)
		goto out;
	if (!x.cx_nfdes) {
		err = -ENOENT;
		goto out;
	}
	qsort(x.cx_fdes, x.cx_nfdes, sizeof(*x.cx_fdes), fde_cmp);
	for (i = 0; i < x.cx_nfdes && !err; i++)
		err = compile_fde(&x, &x.cx_fdes[i]);
	if (!err && x.cx_nrows)
		err = append(&x, x.cx_cursor, (struct fp_unwind_row){ 0 }, 0);
	if (!err && !x.cx_nrows)
		err = -ENOENT;
	if (err)
		goto out;
	keeps_fp = go ||
		   (x.cx_grow_fdes >= FP_MIN_FDES &&
		    (uint64_t)x.cx_fp_fdes * 100 >= (uint64_t)x.cx_grow_fdes * FP_SHARE_PERCENT);
	/* A file that holds a CPython interpreter tells the walker where. */
	err = finish_blob(&x, keeps_fp, fp_pyinterp_find(elf, &py) == 1 ? &py : NULL, blob, len);
	if (!err && st)
		*st = x.cx_stats;
out:
	free(x.cx_fdes);
	free(x.cx_tmp);
	free(x.cx_rows);
	elf_end(elf);
	return err;
}

int fp_cfi_compile(int fd, void **blob, size_t *len)
{
	return fp_cfi_compile_stats(fd, blob, len, NULL);
}

/* Read with the bounded reader, not libelf: the resolver asks this in the
 * server, before the isolated child compiles the table. */
int fp_cfi_has_cfi(int fd)
{
	static const char *const names[] = { ".eh_frame", ".debug_frame" };
	struct fp_elfnote_section s;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (fp_elfnote_section(fd, names[i], &s) == 0 && s.es_type != SHT_NOBITS &&
		    s.es_size)
			return 1;
	return 0;
}

const struct fp_unwind_row *fp_cfi_row(const void *blob, size_t len, uint64_t off)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_row *rows;
	uint32_t lo = 0, hi;

	if (!blob || len < sizeof(*h) || (len - sizeof(*h)) / sizeof(*rows) < h->uh_nrows)
		return NULL;
	rows = (const struct fp_unwind_row *)(h + 1);
	hi = h->uh_nrows;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (rows[mid].ur_pc <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &rows[lo - 1] : NULL;
}
