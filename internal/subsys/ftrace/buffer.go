package ftrace

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/uetrace/uetrace/eventdef"
)

// Sizes of the ring buffer (kernel/trace/ring_buffer.c, 4 KiB pages,
// 64-bit).
const (
	// PageSize is the size of a sub-buffer (buffer_subbuf_size_kb 4).
	PageSize = 4096
	// PageHeaderSize is BUF_PAGE_HDR_SIZE: struct buffer_data_page's u64
	// time_stamp and local_t commit before the data.
	PageHeaderSize = 16
	// PageCapacity is what a sub-buffer holds: 4080 bytes of events.
	PageCapacity = PageSize - PageHeaderSize
	// MaxRecordSize is the longest record the buffer accepts
	// (max_data_size: the capacity less two 32-bit words): 4072 bytes, that
	// is a user_events payload of 4064 bytes.
	MaxRecordSize = PageCapacity - 8
	// DefaultBufferKB is the per-CPU buffer_size_kb the buffer expands to
	// when the first event is enabled (TRACE_BUF_SIZE_DEFAULT, 1441792
	// bytes): 354 sub-buffers, shown as 1410.
	DefaultBufferKB = 1408
	// MinPages is the fewest sub-buffers a per-CPU buffer has, and what it
	// has at boot before it is expanded (buffer_size_kb "7 (expanded:
	// 1408)").
	MinPages = 2
)

// Event header layout (struct ring_buffer_event: type_len:5, time_delta:27,
// array[]).
const (
	typePadding    = 29 // RINGBUF_TYPE_PADDING
	typeTimeExtend = 30 // RINGBUF_TYPE_TIME_EXTEND
	typeLenMax     = 28 // RINGBUF_TYPE_DATA_TYPE_LEN_MAX
	maxSmallData   = 4 * typeLenMax
	tsShift        = 27
	tsMask         = 1<<tsShift - 1
	lenTimeExtend  = 8
	minEventSize   = 8 // RB_EVNT_MIN_SIZE
)

// Flags in the commit word of a page read from trace_pipe_raw.
const (
	rbMissedEvents = 1 << 31
	rbMissedStored = 1 << 30
)

// PagesFor returns how many sub-buffers a per-CPU buffer of kb KiB has
// (ring_buffer_resize: DIV_ROUND_UP(size, 4080), at least MinPages).
func PagesFor(kb int) int {
	n := (kb*1024 + PageCapacity - 1) / PageCapacity
	return max(n, MinPages)
}

// EventSize returns the bytes a record of n bytes takes in a sub-buffer,
// without a time extend (rb_calculate_event_length): a 4-byte event header
// and the record rounded up to 4 bytes (an empty record counts as 1 byte),
// 4 more bytes for the length word of records over 112 bytes; 12 bytes
// become 16, so that a time extend can always be cut from an event. A
// user_events record (8 bytes and more) takes at least 16 bytes.
func EventSize(n int) int {
	if n == 0 {
		n = 1
	}
	if n > maxSmallData {
		n += 4
	}
	n = (n + 4 + 3) &^ 3
	if n == lenTimeExtend+4 {
		n += 4
	}
	return n
}

// page is one sub-buffer: struct buffer_page and its data page.
type page struct {
	data    []byte // PageCapacity bytes of events, as the kernel lays them out
	ts      uint64 // time_stamp: the time of the first event written to it
	write   int    // write index, which is also commit (there is no nesting)
	entries int    // data events written on it since it was last reset
	read    int    // consumer's byte offset; kept stale, as the kernel does, off the reader page
	realEnd int    // where the events end when padding fills the rest
	next    int32  // ring links, indices into cpuBuffer.pages
	prev    int32
	gen     uint64 // bumped whenever its events are thrown away
	slots   []slot // its data events, in order
	rslot   int    // the consumer's next slot (reader page)
}

// slot is one data event on a page.
type slot struct {
	off  uint16 // offset of the data event's header in page.data
	size uint16 // bytes of the data event, header included
	ext  bool   // a time extend precedes it at off-8
	n    uint16 // record length
	pid  int32
	ts   uint64 // the time a reader computes for it
	comm string
	ev   *eventdef.Event
	tp   string
	// dropped are records lost on this CPU before this one was written,
	// which never reached the buffer (Ring.Drop): trace and trace_pipe
	// print "CPU:N [LOST n EVENTS]" before it.
	dropped uint64
}

func (s *slot) end() int { return int(s.off) + int(s.size) }
func (s *slot) record(p *page) []byte {
	h := int(s.off) + 4
	if s.size-4 > maxSmallData {
		h += 4
	}
	return p.data[h : h+int(s.n)]
}

// cpuBuffer is struct ring_buffer_per_cpu: a ring of pages, a reader page
// outside it, and the counters behind entries-in-buffer/entries-written and
// the per_cpu stats file.
type cpuBuffer struct {
	mu    sync.Mutex
	cpu   int
	pages []*page // every page, ring and reader; removed ones are nil
	free  []int32 // indices of removed pages, for reuse

	nrPages            int // pages in the ring
	head, tail, reader int32
	first              int32 // cpu_buffer->pages: where a reset starts the ring
	iters              int   // open iterators (resize_disabled)

	entries      uint64 // records committed (cpu_buffer->entries)
	overrun      uint64 // records lost to overwrite
	read         uint64 // records consumed
	entriesBytes uint64
	readBytes    uint64
	writeStamp   uint64 // time of the last event written
	readStamp    uint64 // time of the last event consumed
	lostEvents   uint64 // overruns not yet reported to a consumer
	lastOverrun  uint64
	pagesRemoved uint64 // resizes that removed pages (iterators restart)
	dropped      uint64 // records that never reached the buffer (Ring.Drop)
	dropPending  uint64 // of those, the ones the next record written carries
	resets       uint64 // Reset calls (iterators restart)

	// disabled is this CPU out of tracing_cpumask: the buffer takes no
	// record (ring_buffer_record_disable_cpu). Set under mu, read without
	// it by Traced (as the kernel's record_disabled is an atomic_t read by
	// every reserve): a write asks before it takes the lock.
	disabled atomic.Bool
	tasks    *tasks   // the Ring's saved_cmdlines and saved_tgids
	task     lastTask // what this CPU's last record saved there
}

func newPage() *page {
	return &page{data: make([]byte, PageCapacity), slots: make([]slot, 0, 16)}
}

func newCPUBuffer(cpu, nrPages int, t *tasks) *cpuBuffer {
	c := &cpuBuffer{cpu: cpu, nrPages: nrPages, tasks: t}
	// Page 0 is the reader page; 1..nrPages form the ring.
	c.pages = make([]*page, nrPages+1)
	for i := range c.pages {
		c.pages[i] = newPage()
	}
	for i := 1; i <= nrPages; i++ {
		p := c.pages[i]
		p.next = int32(i%nrPages + 1)
		p.prev = int32((i+nrPages-2)%nrPages + 1)
	}
	c.pages[0].next, c.pages[0].prev = 0, 0
	c.reader, c.head, c.tail, c.first = 0, 1, 1, 1
	return c
}

// numEntries is rb_num_of_entries: the records in the buffer.
func (c *cpuBuffer) numEntries() uint64 { return c.entries - (c.overrun + c.read) }

// write adds a record at time ts (__rb_reserve_next, rb_move_tail,
// rb_update_event). The caller holds c.mu and has checked that the record
// is not longer than MaxRecordSize.
func (c *cpuBuffer) write(e *Entry) {
	rec := e.Record
	var s spot
	for !c.place(&s, e.TS, len(rec)) {
		c.moveTail(s.w, s.need)
	}
	copy(s.tp.data[s.h:], rec)
	c.commit(&s, e.TS, len(rec), e.PID, e.TGID, e.Comm, e.Event, e.Tracepoint)
}

// spot is where the next record goes on the tail page: the part of
// __rb_reserve_next that finds room for it, before anything is written.
type spot struct {
	tp     *page
	w      int    // the tail page's write index: where the event (or its time extend) starts
	need   int    // bytes the event takes, time extend included
	length int    // bytes of the data event (EventSize)
	h      int    // where the record starts in tp.data
	ext    bool   // a time extend precedes the event
	delta  uint64 // the time since the last event written
	vts    uint64 // the time a reader computes for it
}

// place finds room on the tail page for a record of n bytes at time ts
// and describes it in s; it changes nothing. It is false, with s.w and
// s.need set for moveTail, when the event does not fit on the page.
func (c *cpuBuffer) place(s *spot, ts uint64, n int) bool {
	tp := c.pages[c.tail]
	w := tp.write
	length := EventSize(n)
	var delta uint64
	ext := false
	if w != 0 {
		delta = ts - c.writeStamp
		if delta&^tsMask != 0 {
			ext = true
		}
	}
	need := length
	if ext {
		need += lenTimeExtend
	}
	s.w, s.need = w, need
	if w+need > PageCapacity {
		return false
	}
	var vts uint64
	if w == 0 {
		vts = ts
	} else {
		if ext && delta > 1<<59 {
			// rb_add_timestamp: a clock that went backwards, or a
			// delta beyond 59 bits, is stored as 0.
			delta = 0
		}
		vts = tp.slots[len(tp.slots)-1].ts + delta
	}
	h := w + 4
	if ext {
		h += lenTimeExtend
	}
	if length-4 > maxSmallData {
		h += 4
	}
	s.tp, s.length, s.h, s.ext, s.delta, s.vts = tp, length, h, ext, delta, vts
	return true
}

// commit writes the headers of the event place put at s for time ts,
// whose n record bytes are already at s.h, and records it with the rest
// of its Entry (rb_update_event, rb_commit), and saves its writer for
// saved_cmdlines and saved_tgids. The caller holds c.mu.
func (c *cpuBuffer) commit(s *spot, ts uint64, n int, pid, tgid int32, comm string, ev *eventdef.Event, tracepoint string) {
	tp := s.tp
	c.writeStamp = ts
	if s.w == 0 {
		tp.ts = ts
	}
	d := tp.data
	off := s.w
	delta := s.delta
	if s.ext {
		binary.LittleEndian.PutUint32(d[off:], typeTimeExtend|uint32(delta&tsMask)<<5)
		binary.LittleEndian.PutUint32(d[off+4:], uint32(delta>>tsShift))
		off += lenTimeExtend
		delta = 0
	}
	dataLen := s.length - 4
	if dataLen > maxSmallData {
		binary.LittleEndian.PutUint32(d[off:], uint32(delta)<<5)
		binary.LittleEndian.PutUint32(d[off+4:], uint32(dataLen))
	} else {
		binary.LittleEndian.PutUint32(d[off:], uint32((dataLen+3)/4)|uint32(delta)<<5)
	}
	// The record's rounding up to 4 bytes (at most 7 bytes with the
	// 12-to-16 rule): a loop, where clear would call memclr.
	for i, end := s.h+n, off+s.length; i < end; i++ {
		d[i] = 0
	}
	tp.write = s.w + s.need
	tp.entries++
	// The slot filled in place: a composite literal is built on the stack
	// and copied in.
	if len(tp.slots) < cap(tp.slots) {
		tp.slots = tp.slots[:len(tp.slots)+1]
	} else {
		tp.slots = append(tp.slots, slot{})
	}
	sl := &tp.slots[len(tp.slots)-1]
	sl.off, sl.size, sl.ext, sl.n = uint16(off), uint16(s.length), s.ext, uint16(n)
	sl.pid, sl.ts, sl.comm, sl.ev, sl.tp = pid, s.vts, comm, ev, tracepoint
	sl.dropped = c.dropPending
	c.dropPending = 0
	c.entries++
	c.entriesBytes += uint64(s.need)
	if c.tasks != nil {
		c.tasks.saveIfNew(c, pid, tgid, comm)
	}
}

// moveTail moves the writer to the next page when an event of need bytes
// does not fit after tail bytes (rb_move_tail, rb_handle_head_page,
// rb_tail_page_update, rb_reset_tail). In overwrite mode the head page's
// records are lost when the writer reaches it. The reader page's link is
// never flagged as pointing to the head, so a writer on the reader page
// moves on without overwriting anything.
func (c *cpuBuffer) moveTail(tail, need int) {
	tp := c.pages[c.tail]
	next := tp.next
	if c.tail != c.reader && next == c.head {
		np := c.pages[next]
		c.overrun += uint64(np.entries)
		c.entriesBytes -= uint64(np.write)
		c.head = np.next
	}
	np := c.pages[next]
	np.write, np.entries = 0, 0
	np.slots = np.slots[:0]
	np.gen++
	c.tail = next

	// rb_reset_tail on the page left behind.
	switch {
	case tail >= PageCapacity:
		if tail == PageCapacity {
			tp.realEnd = 0
		}
	case tail > PageCapacity-minEventSize:
		// No room for an event: a null padding header, not counted.
		tp.realEnd = tail
		binary.LittleEndian.PutUint32(tp.data[tail:], typePadding)
	default:
		tp.realEnd = tail
		binary.LittleEndian.PutUint32(tp.data[tail:], typePadding|1<<5)
		binary.LittleEndian.PutUint32(tp.data[tail+4:], uint32(PageCapacity-tail-4))
		c.entriesBytes += uint64(PageCapacity - tail)
		tp.write = PageCapacity
	}
}

// readerPage returns the page the consumer reads from, swapping the
// reader page with the head page of the ring when it has been read to its
// end (rb_get_reader_page). It returns nil when there is nothing to read.
func (c *cpuBuffer) readerPage() *page {
	for range 3 {
		rp := c.pages[c.reader]
		if rp.read < rp.write {
			if rp.read == 0 {
				c.readStamp = rp.ts
			}
			return rp
		}
		if c.tail == c.reader || c.numEntries() == 0 {
			return nil
		}
		rp.write, rp.entries, rp.realEnd = 0, 0, 0
		rp.slots = rp.slots[:0]
		rp.gen++
		h := c.head
		hp := c.pages[h]
		rp.next, rp.prev = hp.next, hp.prev
		c.first = hp.prev
		c.pages[hp.prev].next = c.reader
		c.pages[hp.next].prev = c.reader
		c.head = hp.next
		c.reader = h
		hp.read, hp.rslot = 0, 0
		if c.overrun != c.lastOverrun {
			c.lostEvents = c.overrun - c.lastOverrun
			c.lastOverrun = c.overrun
		}
	}
	return nil
}

// peek returns the next record a consumer reads, and its page, consuming
// time extends and padding before it (rb_buffer_peek, ring_buffer_peek).
func (c *cpuBuffer) peek() (*page, *slot) {
	for {
		rp := c.readerPage()
		if rp == nil {
			return nil, nil
		}
		if rp.rslot < len(rp.slots) {
			s := &rp.slots[rp.rslot]
			if s.ext && rp.read < int(s.off) {
				rp.read += lenTimeExtend
				c.readBytes += lenTimeExtend
				c.readStamp = s.ts
			}
			return rp, s
		}
		// Only padding is left on the page.
		c.readBytes += uint64(rp.write - rp.read)
		rp.read = rp.write
	}
}

// advance consumes the record peek returned (rb_advance_reader).
func (c *cpuBuffer) advance(rp *page, s *slot) {
	rp.rslot++
	rp.read = s.end()
	c.read++
	c.readBytes += uint64(s.size)
	c.readStamp = s.ts
	c.lostEvents = 0
}

// empty is rb_per_cpu_empty.
func (c *cpuBuffer) empty() bool {
	rp := c.pages[c.reader]
	if rp.read != rp.write {
		return false
	}
	if c.tail == c.reader {
		return true
	}
	if c.tail != c.head {
		return false
	}
	return c.pages[c.tail].write == 0
}

// reset empties the buffer (rb_reset_cpu). The pages keep their order and
// their time stamps; the ring starts again at its first page.
func (c *cpuBuffer) reset() {
	for _, p := range c.pages {
		if p == nil {
			continue
		}
		p.write, p.entries, p.read, p.rslot = 0, 0, 0, 0
		p.slots = p.slots[:0]
		p.gen++
	}
	rp := c.pages[c.reader]
	c.head, c.tail = c.first, c.first
	rp.next, rp.prev = c.reader, c.reader
	c.entries, c.overrun, c.read = 0, 0, 0
	c.entriesBytes, c.readBytes = 0, 0
	c.writeStamp = 0
	c.lostEvents, c.lastOverrun = 0, 0
	c.dropped, c.dropPending = 0, 0
	c.pagesRemoved = 0
	c.resets++
}

// resize changes the number of pages in the ring to n (rb_update_pages):
// new pages go in before the head page (rb_insert_pages); pages are
// removed starting after the tail page, and the records on them count as
// overruns (rb_remove_pages).
func (c *cpuBuffer) resize(n int) {
	diff := n - c.nrPages
	switch {
	case diff > 0:
		h := c.head
		prev := c.pages[h].prev
		for range diff {
			var i int32
			if k := len(c.free); k > 0 {
				i = c.free[k-1]
				c.free = c.free[:k-1]
				c.pages[i] = newPage()
			} else {
				i = int32(len(c.pages))
				c.pages = append(c.pages, newPage())
			}
			p := c.pages[i]
			p.prev = prev
			c.pages[prev].next = i
			prev = i
		}
		c.pages[prev].next = h
		c.pages[h].prev = prev
	case diff < 0:
		start := c.tail
		if c.tail == c.reader {
			start = c.pages[c.tail].next
		}
		to := start
		headRemoved := false
		for range -diff {
			to = c.pages[to].next
			if to == c.head {
				headRemoved = true
			}
		}
		next := c.pages[to].next
		first := c.pages[start].next
		c.pages[start].next = next
		c.pages[next].prev = start
		c.pagesRemoved += uint64(-diff)
		c.first = next
		if headRemoved {
			c.head = next
		}
		for i := first; ; {
			p := c.pages[i]
			if p.entries > 0 {
				c.overrun += uint64(p.entries)
				c.entriesBytes -= uint64(p.write)
			}
			c.pages[i] = nil
			c.free = append(c.free, i)
			if i == to {
				break
			}
			i = p.next
		}
	}
	c.nrPages = n
}

// oldestTS is ring_buffer_oldest_event_ts: the time stamp of the reader
// page when the writer is on it, else of the head page, whatever is left
// on it.
func (c *cpuBuffer) oldestTS() uint64 {
	if c.tail == c.reader {
		return c.pages[c.reader].ts
	}
	return c.pages[c.head].ts
}
