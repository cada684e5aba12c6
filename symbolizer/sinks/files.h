/* files.h: writing output files safely: parent directories created, each
 * file written to a temporary name, synced and renamed into place, so
 * readers never see half a profile, even after a crash.  The temporary
 * name is PATH.tmpXXXXXX, six random characters, created with O_EXCL: a
 * file or symbolic link planted at a guessed name is neither followed nor
 * overwritten.  fp_files_sink is the pipeline's file output (pipeline.h):
 * it has the encoders (output.h, otlp.h) make bytes and writes them with
 * fp_write_file. */
#ifndef FP_FILES_H
#define FP_FILES_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "fileio.h"
#include "profile.h"

/* fp_write_file: buf as the file at path (gzip-compressed when gzip is
 * set), mode 0644, synced, written beside it and renamed into place.  0 or
 * a negative errno. */
int fp_write_file(const char *path, const void *buf, size_t len, int gzip);

/* fp_safe_name: copy s into buf as one path component: characters outside
 * [A-Za-z0-9._-] become '_', and "", "." and ".." become "_". */
void fp_safe_name(const char *s, char *buf, size_t len);

/* The file sink's layouts. */
enum fp_files_layout {
	FP_FILES_INTERVALS, /* DIR/HOST/STAMP-SEQ.folded and .pb.gz (the server);
			     * off-CPU: DIR/HOST/offcpu/STAMP-SEQ.folded, .pb.gz */
	FP_FILES_RECORD,    /* DIR/profile.folded, profile.pb.gz, profile.otlp.pb and
				 * flame.svg (fleetprof record); off-CPU: DIR/offcpu.folded,
				 * .pb.gz, .otlp.pb and .svg */
};

struct fp_files_sink {
	const char *fs_dir;
	enum fp_files_layout fs_layout;
	int fs_by_thread;            /* folded and SVG: thread names under process names */
	const char *fs_title;        /* FP_FILES_RECORD: the flame graph's title */
	const char *fs_offcpu_title; /* FP_FILES_RECORD: the off-CPU flame graph's */
};

/* fp_files_sink: a pipeline sink (fp_sink_fn) that writes each profile in
 * the layout of arg, a struct fp_files_sink (only read: called from
 * several sink workers at once, each for hosts of its own).  0 or the first negative errno (logged). */
int fp_files_sink(void *arg, const struct fp_profile *p, const struct fp_hello *hello,
		  uint64_t seq);

#endif
