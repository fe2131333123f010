// Package shmringtest writes a ring set's memory as a hostile producer
// can — any bytes in a ring's data, head, tail, key and header, at any
// time — for the fuzz targets of the rings' readers: shmring's consumer,
// and a handed set's reader (internal/handover). It is for tests only.
//
// It maps the memfd as the producer does and knows a ring's layout from
// package shmring's doc (the header's words at their offsets), without
// importing it, so that shmring's own tests can use it too;
// shmring's TestHostileLayout checks the offsets against the package's.
package shmringtest

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// The header words a hostile producer writes, at their offsets in a
// ring's header page (shmring's layout).
const (
	OffKey  = 24
	OffHead = 64
	OffTail = 128
)

// Memory is a ring set's memfd — or a lone ring's: a set of one ring
// without the set's first page — mapped writable, as its producer has it.
type Memory struct {
	mem      []byte
	first    int // the offset of ring 0's header page
	page     int
	size     int // a ring's data bytes
	rings    int
	pristine [][]byte // each ring's first header bytes, as at Map
}

// HeaderBytes is how many of a header page's first bytes Load restores
// before it writes a fuzz input's: the words a ring's reader checks.
const HeaderBytes = 64

// Map maps memfd fd, holding rings rings (a set's layout: a first page,
// then each ring's header page and data), or with rings 0 a lone ring (a
// header page and data), writable until the test ends. It keeps each
// header's first HeaderBytes bytes, which Load puts back.
func Map(tb testing.TB, fd, rings int) *Memory {
	tb.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		tb.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	page := unix.Getpagesize()
	m := &Memory{mem: mem, page: page, rings: max(rings, 1)}
	if rings == 0 {
		m.size = len(mem) - page
	} else {
		m.first = page
		m.size = (len(mem)-page)/rings - page
	}
	for k := range m.rings {
		m.pristine = append(m.pristine, append([]byte(nil), m.header(k)[:HeaderBytes]...))
	}
	return m
}

// Bytes is the whole memfd.
func (m *Memory) Bytes() []byte { return m.mem }

// Header is the offset of ring k's header page in Bytes.
func (m *Memory) Header(k int) int { return m.first + k*(m.page+m.size) }

// Size is a ring's data size.
func (m *Memory) Size() int { return m.size }

func (m *Memory) header(k int) []byte { return m.mem[m.Header(k) : m.Header(k)+m.page] }

// Data is ring k's data area (once: the mapping is not doubled here).
func (m *Memory) Data(k int) []byte { return m.mem[m.Header(k)+m.page : m.Header(k)+m.page+m.size] }

// Load makes ring k what one fuzz input says: its header's first bytes
// as at Map, then header over them; its data area data (zeros after it);
// its key, head and tail. A consumer attached after reads the key from
// the header.
func (m *Memory) Load(k int, data []byte, head, tail, key uint64, header []byte) {
	h := m.header(k)
	copy(h, m.pristine[k])
	copy(h[:HeaderBytes], header)
	d := m.Data(k)
	clear(d)
	copy(d, data)
	ne := binary.NativeEndian
	ne.PutUint64(h[OffKey:], key)
	ne.PutUint64(h[OffHead:], head)
	ne.PutUint64(h[OffTail:], tail)
}

// Save is ring k as Load takes it: its data area, head, tail and key —
// a seed, from a ring an honest producer wrote.
func (m *Memory) Save(k int) (data []byte, head, tail, key uint64) {
	h := m.header(k)
	ne := binary.NativeEndian
	return append([]byte(nil), m.Data(k)...), ne.Uint64(h[OffHead:]), ne.Uint64(h[OffTail:]), ne.Uint64(h[OffKey:])
}
