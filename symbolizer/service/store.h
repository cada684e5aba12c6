/* store.h: the symbol service's file store.  Uploaded ELF files live under
 * DIR/.build-id/xx/rest.debug (files with debug information) and
 * DIR/.build-id/xx/rest (executables and shared objects), where xx are the
 * first two hex digits of the build-ID and rest the others: the layout of
 * /usr/lib/debug, so the resolver's debug directory, debuginfod clients and
 * gdb can all read it.  Files are written under DIR/.tmp and renamed into
 * place, so readers never see half a file and two uploads of one build-ID
 * at once leave one whole file.  Every function is safe to call from any
 * thread: the store's only state is the file system. */
#ifndef FP_STORE_H
#define FP_STORE_H

#include <stddef.h>
#include <stdint.h>

/* The kinds of file the store keeps, as bits: a file built with -g and not
 * stripped is both. */
enum fp_store_kind {
	FP_STORE_DEBUGINFO = 1,  /* rest.debug: .debug_info, or a symbol table without code */
	FP_STORE_EXECUTABLE = 2, /* rest: has loadable code */
};
#define FP_STORE_ANY (FP_STORE_DEBUGINFO | FP_STORE_EXECUTABLE)

/* Build-IDs in URLs and file names: lowercase hex, 2 to 64 digits. */
#define FP_STORE_HEX_MIN 2
#define FP_STORE_HEX_MAX 64

struct fp_store;

/* fp_store_hex_valid: non-zero when hex is 2 to 64 characters of
 * [0-9a-f] and an even count (whole bytes).  Nothing else can become part
 * of a path, so no "..", "/" or "%2f" ever reaches the file system. */
int fp_store_hex_valid(const char *hex);

/* fp_store_kind_name / fp_store_kind_parse: "debuginfo", "executable". */
const char *fp_store_kind_name(int kind);
int fp_store_kind_parse(const char *name); /* the kind, or -EINVAL */

/* fp_store_open: use DIR (created with its .build-id and .tmp
 * subdirectories if missing).  Temporary files older than a day, left by a
 * crash, are removed.  0 or a negative errno. */
int fp_store_open(struct fp_store **s, const char *dir);
void fp_store_close(struct fp_store *s);
const char *fp_store_dir(const struct fp_store *s);

/* fp_store_path: where a file of one kind (not a mask) for hex lives.
 * 0, -EINVAL (bad hex or kind, or a build-ID of one byte, which has no
 * file name in this layout) or -ENAMETOOLONG. */
int fp_store_path(const struct fp_store *s, const char *hex, int kind, char *buf, size_t len);

/* fp_store_has: the kinds among mask that the store holds for hex (0 if
 * none or hex is invalid). */
int fp_store_has(const struct fp_store *s, const char *hex, int mask);

/* fp_store_open_file: an O_RDONLY fd on the stored file of one kind, its
 * size in *size.  -EINVAL (bad hex), -ENOENT or a negative errno. */
int fp_store_open_file(const struct fp_store *s, const char *hex, int kind, uint64_t *size);

/* fp_store_classify: the kinds of the ELF file at fd (0: neither debug
 * information nor code, e.g. a core file).  Debug info: a non-empty
 * .debug_info (or .zdebug_info), or a symbol table without code.  Code: an
 * executable section with contents (a detached debug file keeps its
 * sections' headers but not their bytes), or, without section headers, an
 * executable PT_LOAD segment with bytes in the file.  0 with *kinds set,
 * -EINVAL (not ELF or malformed) or -ENOSYS (libelf unusable). */
int fp_store_classify(int fd, int *kinds);

/* fp_store_classify_isolated: fp_store_classify in the isolated child
 * (isolate.h), for files from outside.  Its results, or -ECHILD when the
 * child failed. */
int fp_store_classify_isolated(int fd, int *kinds);

/* fp_store_tmpfile: a new empty file under DIR/.tmp, open for reading and
 * writing; its path goes to buf.  The caller either passes it to
 * fp_store_commit or removes it with fp_store_discard.  fd or a negative
 * errno. */
int fp_store_tmpfile(struct fp_store *s, char *buf, size_t len);
void fp_store_discard(const char *tmp);

/* fp_store_commit: put the complete temporary file tmp in place under hex
 * for each kind in kinds, and remove tmp.  A kind already stored is left
 * as it is (not rewritten); *created gets the kinds that are new.  Each
 * name appears at once, whole (link/rename, never replacing).  0,
 * -EINVAL or a negative errno (tmp is removed in every case). */
int fp_store_commit(struct fp_store *s, const char *tmp, const char *hex, int kinds, int *created);

#endif
