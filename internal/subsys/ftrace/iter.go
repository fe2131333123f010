package ftrace

// Iter reads the buffers the way the trace file does: every record, oldest
// first, merged across CPUs by time stamp (the lowest CPU first on a tie),
// without consuming anything. It reads the live buffers, like the kernel's
// iterator: records written while it runs may show up, and when the writer
// overwrites the page it is reading it starts that page again and reports
// the loss ([Marks].Lost = LostUnknown, "CPU:N [LOST EVENTS]").
//
// While an Iter is open the buffers cannot be resized (EBUSY), as in the
// kernel. An Iter is for one goroutine at a time; Close it when done.
type Iter struct {
	r        *Ring
	cpus     []iterCPU
	only     int  // the CPU read, or -1 for all
	annotate bool // the buffer had overruns when the iterator was opened
	started  []bool
	idx      int // iter->idx: entries found so far, less one
	closed   bool
}

// iterCPU is struct ring_buffer_iter.
type iterCPU struct {
	page  int32
	gen   uint64
	head  int // byte offset in the page
	slot  int // next slot at or after head
	lost  bool
	cache struct {
		read, removed, resets uint64
		reader                int32
	}
}

// Marks say what the trace file prints before an entry.
type Marks struct {
	// Lost is LostUnknown when the iterator found that records on the
	// entry's CPU were overwritten while it read them; else the records
	// dropped on that CPU just before the entry (Ring.Drop), 0 if none.
	Lost uint64
	// Started is set for the first entry of a CPU's buffer when the
	// buffers had overruns at open and the entry is neither the first nor
	// the second of the trace: the kernel prints "##### CPU N buffer
	// started ####" (test_cpu_buff_start; iter->idx > 1).
	Started bool
}

// NewIter opens an iterator over all CPUs (cpu < 0), as opening trace
// does, or over one CPU's buffer (per_cpu/cpuN/trace).
func (r *Ring) NewIter(cpu int) *Iter {
	it := &Iter{r: r, only: -1, annotate: r.Overruns() != 0, idx: -1}
	if cpu >= 0 && cpu < len(r.cpus) {
		it.only = cpu
	}
	it.cpus = make([]iterCPU, len(r.cpus))
	it.started = make([]bool, len(r.cpus))
	for i, c := range r.cpus {
		if it.only >= 0 && i != it.only {
			continue
		}
		c.mu.Lock()
		c.iters++
		it.reset(c, &it.cpus[i])
		c.mu.Unlock()
	}
	return it
}

// Close releases the iterator; the buffers can be resized again.
func (it *Iter) Close() {
	if it.closed {
		return
	}
	it.closed = true
	for i, c := range it.r.cpus {
		if it.only >= 0 && i != it.only {
			continue
		}
		c.mu.Lock()
		c.iters--
		c.mu.Unlock()
	}
}

// rewind starts the iterator again at every CPU's oldest record, as
// s_start does when a read goes back (tracing_iter_reset, iter->idx = -1);
// the CPUs marked started stay so.
func (it *Iter) rewind() {
	for i, c := range it.r.cpus {
		if it.only >= 0 && i != it.only {
			continue
		}
		c.mu.Lock()
		it.reset(c, &it.cpus[i])
		c.mu.Unlock()
	}
	it.idx = -1
}

// reset is rb_iter_reset: start at the consumer's position on the reader
// page.
func (it *Iter) reset(c *cpuBuffer, st *iterCPU) {
	rp := c.pages[c.reader]
	st.page, st.head, st.slot, st.gen = c.reader, rp.read, rp.rslot, rp.gen
	st.lost = false
	st.cache.read, st.cache.removed, st.cache.resets = c.read, c.pagesRemoved, c.resets
	st.cache.reader = c.reader
}

// inc is rb_inc_iter: from the reader page to the head page, else to the
// next page of the ring.
func (it *Iter) inc(c *cpuBuffer, st *iterCPU) {
	if st.page == c.reader {
		st.page = c.head
	} else {
		st.page = c.pages[st.page].next
	}
	st.head, st.slot, st.gen = 0, 0, c.pages[st.page].gen
}

// atEnd is ring_buffer_iter_empty.
func (it *Iter) atEnd(c *cpuBuffer, st *iterCPU) bool {
	commit := c.pages[c.tail].write
	return (st.page == c.tail && st.head >= commit) ||
		(st.page == c.reader && c.tail == c.head && c.pages[c.head].read == commit &&
			st.head == c.pages[c.reader].write)
}

// peek returns the iterator's next record on c (ring_buffer_iter_peek,
// rb_iter_peek, rb_iter_head_event), or nil. Like the kernel it gives up
// after three steps (a page change, a time extend, a restart of an
// overwritten page), which only happens while writers overtake it.
func (it *Iter) peek(c *cpuBuffer, st *iterCPU) (*page, *slot) {
	if st.cache.read != c.read || st.cache.reader != c.reader ||
		st.cache.removed != c.pagesRemoved || st.cache.resets != c.resets {
		it.reset(c, st)
	}
	for range 3 {
		if it.atEnd(c, st) || c.empty() {
			return nil, nil
		}
		p := c.pages[st.page]
		if st.head >= p.write {
			it.inc(c, st)
			continue
		}
		if p.gen != st.gen {
			// The writer reused the page: start it again.
			st.head, st.slot, st.gen, st.lost = 0, 0, p.gen, true
			continue
		}
		if st.slot >= len(p.slots) {
			// Padding ends the page; ring_buffer_iter_peek skips it and
			// tries again with a fresh count.
			st.head = p.write
			if st.page != c.tail {
				it.inc(c, st)
			}
			return it.peek(c, st)
		}
		s := &p.slots[st.slot]
		if s.ext && st.head < int(s.off) {
			st.head = int(s.off)
			continue
		}
		return p, s
	}
	return nil, nil
}

// advance is rb_advance_iter after the record peek returned.
func (it *Iter) advance(c *cpuBuffer, st *iterCPU, p *page, s *slot) {
	st.head = s.end()
	st.slot++
	if st.head >= p.write && st.page != c.tail {
		it.inc(c, st)
	}
}

// Next reads the next entry into e and reports false when there is none
// (trace_find_next_entry_inc, __find_next_entry, peek_next_entry).
func (it *Iter) Next(e *Entry) (m Marks, ok bool) {
	if it.closed {
		return Marks{}, false
	}
	best := -1
	var bestTS uint64
	var bestLost bool
	var dropped uint64
	for i, c := range it.r.cpus {
		if it.only >= 0 && i != it.only {
			continue
		}
		st := &it.cpus[i]
		c.mu.Lock()
		_, s := it.peek(c, st)
		lost := st.lost
		st.lost = false
		if s != nil && (best < 0 || s.ts < bestTS) {
			best, bestTS, bestLost = i, s.ts, lost
		}
		c.mu.Unlock()
	}
	if best < 0 {
		return Marks{}, false
	}
	c, st := it.r.cpus[best], &it.cpus[best]
	c.mu.Lock()
	p, s := it.peek(c, st)
	if s == nil {
		// Overwritten since: read whatever comes next.
		c.mu.Unlock()
		return it.Next(e)
	}
	if st.lost {
		bestLost, st.lost = true, false
	}
	it.r.fill(e, best, p, s)
	dropped = s.dropped
	it.advance(c, st, p, s)
	c.mu.Unlock()

	it.idx++
	switch {
	case bestLost:
		m.Lost = LostUnknown
	case dropped != 0:
		m.Lost = dropped
	}
	if it.annotate && !it.started[best] {
		it.started[best] = true
		m.Started = it.idx > 1
	}
	return m, true
}

// AppendNext appends what the trace file shows for the next entry — the
// lost-events line, the buffer-started line, the line itself — and
// reports false at the end. e is scratch space for the entry.
func (it *Iter) AppendNext(dst []byte, e *Entry) ([]byte, bool) {
	m, ok := it.Next(e)
	if !ok {
		return dst, false
	}
	return AppendMarked(dst, e, m), true
}

// AppendMarked appends e's line after the lines its marks call for.
func AppendMarked(dst []byte, e *Entry, m Marks) []byte {
	if m.Lost != 0 {
		dst = AppendLost(dst, e.CPU, m.Lost)
	}
	if m.Started {
		dst = AppendBufferStarted(dst, e.CPU)
	}
	return AppendLine(dst, e)
}

// AppendTrace appends the whole trace file (cpu < 0) or
// per_cpu/cpuN/trace: the header with the counts at the time it is
// printed, then every entry.
func (r *Ring) AppendTrace(dst []byte, cpu int) []byte {
	it := r.NewIter(cpu)
	defer it.Close()
	// The header counts every CPU, for per_cpu/cpuN/trace as well
	// (print_event_info, get_total_entries).
	in, written := r.Entries()
	dst = AppendHeader(dst, in, written, len(r.cpus))
	var e Entry
	for {
		var ok bool
		dst, ok = it.AppendNext(dst, &e)
		if !ok {
			return r.appendDropsAfter(dst, cpu, false)
		}
	}
}
