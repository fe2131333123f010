package ftrace

import (
	"context"
	"encoding/binary"
)

// ReadRawPage consumes the next sub-buffer of cpu's buffer and appends it
// to dst as per_cpu/cpuN/trace_pipe_raw returns it to a read(2) of
// PageSize bytes (ring_buffer_read_page): a 16-byte header — the u64 time
// stamp the events' deltas start from and the u64 commit, the length of
// the events with flag bits 1<<31 (records were lost before this page) and
// 1<<30 (their count follows the events, as a u64) — then the events in
// the kernel's format, zeros to PageSize. ok is false when there is
// nothing to read.
//
// A page the writer has finished is handed over whole: its time stamp,
// its events, its commit without the padding that ends it. From a page
// that was partly consumed or that the writer is still on, the unread
// events are copied, with the time stamp of the last record consumed.
//
// Bytes that the kernel leaves as they were in the page — the rounding of
// a record up to 4 bytes, the body of a padding event — are zero here.
func (r *Ring) ReadRawPage(dst []byte, cpu int) (out []byte, ok bool) {
	return r.ReadRaw(dst, cpu, PageSize)
}

// ReadRaw is ReadRawPage for a read(2) of n bytes (ring_buffer_read_page's
// len): a page still holding more than the n-PageHeaderSize bytes of
// events that fit is not handed over, but the events that fit are copied
// out of it, a time extend always with the event after it; ok is false,
// and nothing is consumed, when n is PageHeaderSize or less or the next
// event does not fit — or when there is nothing to read (Empty tells
// which). The page appended is PageSize bytes whatever n is: the kernel's
// read(2) returns it in reads of n bytes.
func (r *Ring) ReadRaw(dst []byte, cpu, n int) (out []byte, ok bool) {
	return r.readRaw(dst, cpu, n, false)
}

// SpliceRaw is ReadRawPage as splice(2) of trace_pipe_raw takes pages
// (ring_buffer_read_page with full set, tracing_buffers_splice_read): a
// page the writer is still on is not read, even in part — ok is false
// then, as when there is nothing to read.
func (r *Ring) SpliceRaw(dst []byte, cpu int) (out []byte, ok bool) {
	return r.readRaw(dst, cpu, PageSize, true)
}

func (r *Ring) readRaw(dst []byte, cpu, n int, full bool) (out []byte, ok bool) {
	if n <= PageHeaderSize {
		return dst, false
	}
	room := min(n-PageHeaderSize, PageCapacity)
	c := r.cpus[cpu]
	r.consumeMu.Lock()
	defer r.consumeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()

	rp := c.readerPage()
	if rp == nil {
		return dst, false
	}
	// The bytes from the read position that go together: a time extend
	// and its event, an event, or the padding that ends the page
	// (rb_event_ts_length).
	next := func() int {
		if rp.rslot < len(rp.slots) {
			return rp.slots[rp.rslot].end() - rp.read
		}
		return rp.write - rp.read
	}
	copying := rp.read != 0 || c.tail == c.reader || room < rp.write-rp.read
	if copying && (room < next() || full && c.tail == c.reader) {
		return dst, false
	}
	base := len(dst)
	dst = append(dst, make([]byte, PageSize)...)
	pg := dst[base:]
	data := pg[PageHeaderSize:]
	missed := c.lostEvents
	var size int
	if copying {
		// Copy event by event from the read position, while they fit.
		binary.LittleEndian.PutUint64(pg, c.readStamp)
		for rp.read < rp.write && next() <= room-size {
			start := rp.read
			if rp.rslot < len(rp.slots) {
				s := &rp.slots[rp.rslot]
				end := s.end()
				if s.ext && start < int(s.off) {
					c.readBytes += lenTimeExtend
					end = int(s.off)
				} else {
					c.read++
					c.readBytes += uint64(s.size)
					c.readStamp = s.ts
					rp.rslot++
				}
				copy(data[size:], rp.data[start:end])
				size += end - start
				rp.read = end
			} else {
				// The padding event: its header, then zeros.
				c.readBytes += uint64(rp.write - start)
				copy(data[size:], rp.data[start:start+8])
				size += rp.write - start
				rp.read = rp.write
			}
		}
	} else {
		// Hand over the whole page.
		c.read += uint64(rp.entries)
		c.readBytes += uint64(rp.write)
		size = rp.write
		if rp.realEnd != 0 {
			size = rp.realEnd
		}
		binary.LittleEndian.PutUint64(pg, rp.ts)
		copy(data, rp.data[:size])
		rp.write, rp.entries, rp.read, rp.rslot = 0, 0, 0, 0
		rp.slots = rp.slots[:0]
		rp.gen++
	}
	commit := uint64(size)
	c.lostEvents = 0
	if missed != 0 {
		if PageCapacity-size >= 8 {
			binary.LittleEndian.PutUint64(data[size:], missed)
			commit |= rbMissedStored
		}
		commit |= rbMissedEvents
	}
	binary.LittleEndian.PutUint64(pg[8:], commit)
	return dst, true
}

// RawReady reports whether cpu's trace_pipe_raw polls readable with
// buffer_percent percent (trace_poll, ring_buffer_poll_wait,
// rb_watermark_hit): something to read, and for percent > 0 also the
// writer off the page the reader is on and at least percent of the ring's
// pages dirty — filled and not read, counting the writer's page as one
// (full_hit), so that 100 means "the whole buffer". A read does not wait
// for it: only for something to read (WaitRaw).
func (r *Ring) RawReady(cpu, percent int) bool {
	c := r.cpus[cpu]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.empty() {
		return false
	}
	if percent <= 0 {
		return true
	}
	if c.tail == c.reader {
		return false
	}
	return (c.dirtyPages()+1)*100 >= percent*c.nrPages
}

// dirtyPages is ring_buffer_nr_dirty_pages: the ring's pages the writer
// has left and the reader has not taken, from the head page up to the
// writer's. The caller holds c.mu.
func (c *cpuBuffer) dirtyPages() int {
	n := 0
	for i := c.head; i != c.tail && n < c.nrPages; i = c.pages[i].next {
		n++
	}
	return n
}

// WaitRawReady returns once RawReady(cpu, percent()) holds, or with
// ctx's error: what a poll of trace_pipe_raw waits for. percent is asked
// at each change of the buffer (buffer_percent may be written meanwhile).
func (r *Ring) WaitRawReady(ctx context.Context, cpu int, percent func() int) error {
	return r.waitUntil(ctx, func() bool { return r.RawReady(cpu, percent()) })
}

// WaitRaw returns once cpu's buffer has something to read, or with ctx's
// error: what a read(2) of trace_pipe_raw waits for (wait_on_pipe(iter,
// 0) in tracing_buffers_read).
func (r *Ring) WaitRaw(ctx context.Context, cpu int) error {
	return r.waitUntil(ctx, func() bool { return !r.Empty(cpu) })
}

// waitUntil returns once cond holds, asking it again at each change of
// the buffer, or with ctx's error.
func (r *Ring) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		r.waiters.Add(1)
		ch := r.waitChan()
		// Asked after a waiter is counted: a record that came in before
		// found no waiter and woke no one.
		if cond() {
			r.waiters.Add(-1)
			return nil
		}
		select {
		case <-ch:
			r.waiters.Add(-1)
		case <-ctx.Done():
			r.waiters.Add(-1)
			return ctx.Err()
		}
	}
}
