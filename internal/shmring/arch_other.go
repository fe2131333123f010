//go:build !amd64

package shmring

import (
	"sync/atomic"
	"unsafe"
)

func prefetchw(unsafe.Pointer) {}

const prefetchAhead = 0

// storeFirst: elsewhere an atomic store, so that no architecture's
// compiler or memory order splits or delays it.
func storeFirst(p *uint64, w uint64) { atomic.StoreUint64(p, w) }
