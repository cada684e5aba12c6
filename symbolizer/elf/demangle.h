/* demangle.h: C++ names as people read them, bounded in what one name
 * may cost: the runtime's demangler (__cxa_demangle), which needs about
 * 256 KiB of stack, given only names whose output is bounded. */
#ifndef FP_DEMANGLE_H
#define FP_DEMANGLE_H

/* fp_demangle: the demangled form of an Itanium C++ name (malloc'd), or
 * NULL if name is not mangled or cannot be demangled.  Written as
 * llvm-symbolizer writes names: a suffix after the mangled name in
 * parentheses ("f() (.isra.0)", not "f() [clone .isra.0]"), and no space
 * in "operator<<int>". */
char *fp_demangle(const char *name);

#endif
