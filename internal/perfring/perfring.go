// Package perfring opens perf events with perf_event_open(2) and reads the
// records the kernel puts in their mmap ring buffers.
//
// It is the raw kernel interface only: it hands out each record's bytes
// (struct perf_event_header and its body, as perf.data stores them) and
// does not parse samples; package perfdata does that.
package perfring

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open is perf_event_open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC), with
// attr.Size filled in.
func Open(attr *unix.PerfEventAttr, pid, cpu int) (int, error) {
	attr.Size = uint32(unsafe.Sizeof(*attr))
	fd, err := unix.PerfEventOpen(attr, pid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("perf_event_open(type %d, config %d, cpu %d): %w", attr.Type, attr.Config, cpu, err)
	}
	return fd, nil
}

// ID is the event's sample id (PERF_EVENT_IOC_ID), which samples carry in
// PERF_SAMPLE_ID and PERF_SAMPLE_IDENTIFIER.
func ID(fd int) (uint64, error) {
	var id uint64
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.PERF_EVENT_IOC_ID), uintptr(unsafe.Pointer(&id)))
	if errno != 0 {
		return 0, fmt.Errorf("PERF_EVENT_IOC_ID: %w", errno)
	}
	return id, nil
}

// SetOutput sends fd's records to the ring of target (PERF_EVENT_IOC_SET_OUTPUT):
// both must be on the same CPU. perf record uses it to keep one ring per CPU
// whatever the number of events.
func SetOutput(fd, target int) error {
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_OUTPUT, target); err != nil {
		return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT: %w", err)
	}
	return nil
}

// Ring is the mmap'd ring buffer of a perf event: a metadata page and a
// power-of-two number of data pages.
type Ring struct {
	FD   int
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
	mask uint64
	// scratch holds a record that wraps around the end of the data area.
	scratch []byte
}

// NewRing maps dataPages (a power of two) data pages of fd's ring. The
// ring is mapped writable so that the reader can move data_tail: the
// kernel then never overwrites unread records and counts them as lost
// (PERF_RECORD_LOST) instead.
func NewRing(fd, dataPages int) (*Ring, error) {
	if dataPages <= 0 || dataPages&(dataPages-1) != 0 {
		return nil, fmt.Errorf("perf ring of %d pages: not a power of two: %w", dataPages, unix.EINVAL)
	}
	pg := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+dataPages)*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap perf ring of %d pages: %w", dataPages, err)
	}
	r := &Ring{FD: fd, mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
	off, size := r.meta.Data_offset, r.meta.Data_size
	if off == 0 { // kernels before 4.1 leave these zero
		off, size = uint64(pg), uint64(dataPages*pg)
	}
	r.data = mem[off : off+size]
	r.mask = size - 1
	return r, nil
}

// Size is the ring's data size in bytes.
func (r *Ring) Size() int { return len(r.data) }

// Read calls fn with every record the kernel has completed since the last
// Read, in ring order, then gives their space back. A record's bytes are
// valid only during fn. It returns the number of records read.
func (r *Ring) Read(fn func(rec []byte)) int {
	// data_head is written by the kernel; the acquire load orders it before
	// the reads of the records it covers (smp_rmb in perf's own reader).
	head := atomic.LoadUint64(&r.meta.Data_head)
	tail := r.meta.Data_tail
	n := 0
	for tail < head {
		pos := tail & r.mask
		var hdr [8]byte
		r.copyOut(hdr[:], pos)
		size := uint64(binary.NativeEndian.Uint16(hdr[6:]))
		if size < 8 || tail+size > head {
			// A malformed size would loop forever or read past what the
			// kernel wrote: drop the rest of this batch.
			tail = head
			break
		}
		var rec []byte
		if pos+size <= uint64(len(r.data)) {
			rec = r.data[pos : pos+size]
		} else {
			if cap(r.scratch) < int(size) {
				r.scratch = make([]byte, 64<<10)
			}
			rec = r.scratch[:size]
			r.copyOut(rec, pos)
		}
		fn(rec)
		n++
		tail += size
	}
	// The release store orders our reads before the kernel may reuse the
	// space (smp_mb before writing data_tail).
	atomic.StoreUint64(&r.meta.Data_tail, tail)
	return n
}

// Pending is the number of unread bytes in the ring.
func (r *Ring) Pending() uint64 {
	return atomic.LoadUint64(&r.meta.Data_head) - r.meta.Data_tail
}

func (r *Ring) copyOut(dst []byte, pos uint64) {
	k := copy(dst, r.data[pos:])
	copy(dst[k:], r.data)
}

// Close unmaps the ring and closes its descriptor.
func (r *Ring) Close() error {
	var err error
	if r.mem != nil {
		err = unix.Munmap(r.mem)
		r.mem, r.data = nil, nil
	}
	if r.FD >= 0 {
		if e := unix.Close(r.FD); err == nil {
			err = e
		}
		r.FD = -1
	}
	return err
}
