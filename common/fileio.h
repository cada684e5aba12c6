/* fileio.h: small file utilities every side uses: directories with
 * their parents, and writes that retry until everything is written. */
#ifndef FP_FILEIO_H
#define FP_FILEIO_H

#include <stddef.h>

/* fp_mkdirs: create dir and its parents (mode 0755).  0 or a negative errno. */
int fp_mkdirs(const char *dir);

/* fp_write_all: all of buf to fd, retrying short writes and EINTR.  0 or a
 * negative errno (-EIO when write(2) wrote nothing). */
int fp_write_all(int fd, const void *buf, size_t len);

#endif
