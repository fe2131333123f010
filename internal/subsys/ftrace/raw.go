package ftrace

import "encoding/binary"

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
	c := r.cpus[cpu]
	r.consumeMu.Lock()
	defer r.consumeMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()

	rp := c.readerPage()
	if rp == nil {
		return dst, false
	}
	base := len(dst)
	dst = append(dst, make([]byte, PageSize)...)
	pg := dst[base:]
	data := pg[PageHeaderSize:]
	missed := c.lostEvents
	var size int
	if rp.read != 0 || c.tail == c.reader {
		// Copy event by event from the read position.
		binary.LittleEndian.PutUint64(pg, c.readStamp)
		for rp.read < rp.write {
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
