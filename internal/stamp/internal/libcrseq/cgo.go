//go:build cgo

// Package libcrseq says where the C library linked into the process keeps
// each thread's struct rseq (rseq(2)), so that package stamp can read the
// CPU from it instead of registering its own, which the kernel refuses once
// the C library registered one. It is a package of its own because stamp
// has Go assembly, which a package that uses cgo cannot.
//
// It is not a binding of rseq: it reads two variables, once.
package libcrseq

/*
#include <stddef.h>

// glibc 2.35 and later export where they put each thread's struct rseq
// (sys/rseq.h); weak, so that other C libraries and older glibc link too.
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

static long uetrace_rseq_offset(void) { return &__rseq_offset ? (long)__rseq_offset : 0; }
static unsigned uetrace_rseq_size(void) { return &__rseq_size ? __rseq_size : 0; }
*/
import "C"

// Area says where the C library keeps each thread's struct rseq, as an
// offset from the thread pointer, and how much of it the kernel fills;
// false when the C library registered none (not glibc, glibc before 2.35,
// or its registration turned off with GLIBC_TUNABLES=glibc.pthread.rseq=0).
func Area() (off int, size uint32, ok bool) {
	size = uint32(C.uetrace_rseq_size())
	if size == 0 {
		return 0, 0, false
	}
	return int(C.uetrace_rseq_offset()), size, true
}
