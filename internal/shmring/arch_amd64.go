package shmring

import "unsafe"

// prefetchw asks the CPU to bring the cache line at p into its cache for
// writing (PREFETCHW: AMD's since the K6-2, Intel's since Broadwell; a
// no-op where it is missing). It never faults.
//
//go:noescape
func prefetchw(p unsafe.Pointer)

const prefetchAhead = 256

// storeFirst stores a record's first word before its payload: a plain
// MOV, which on amd64 is a single-copy atomic 64-bit store for an aligned
// word and, under the architecture's total store order, becomes visible
// before the stores that follow it — the commit among them. Not an XCHG:
// that would wait here for the record's cache line, which the consumer
// read a lap ago, before the payload's stores can even start; as a MOV its
// fetch overlaps theirs, and the commit's XCHG waits once for all.
func storeFirst(p *uint64, w uint64) { *p = w }
