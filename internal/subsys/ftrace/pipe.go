package ftrace

import (
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// TraceSeqSize is TRACE_SEQ_BUFFER_SIZE on 64-bit: the bytes of text
// trace_pipe prepares for one read(2), and the longest line it can print.
const TraceSeqSize = 8192 - 36

// next finds the record a consumer takes next, from every CPU (cpu < 0)
// or one, and its CPU and lost count (__find_next_entry with
// ring_buffer_peek). Peeking has the kernel's side effects: a CPU whose
// reader page is used up swaps it for the head page, even if another
// CPU's record is taken. The caller holds r.consumeMu.
func (r *Ring) next(cpu int) (best int, lost uint64) {
	best = -1
	var bestTS uint64
	for i, c := range r.cpus {
		if cpu >= 0 && i != cpu {
			continue
		}
		c.mu.Lock()
		_, s := c.peek()
		if s != nil && (best < 0 || s.ts < bestTS) {
			best, bestTS, lost = i, s.ts, c.lostEvents+s.dropped
		}
		c.mu.Unlock()
	}
	return best, lost
}

// take copies the record next found on cpu into e and, if consume is set,
// removes it (ring_buffer_consume). It reports false if the record has gone
// (the buffer was reset meanwhile).
func (r *Ring) take(cpu int, e *Entry, consume bool) bool {
	c := r.cpus[cpu]
	c.mu.Lock()
	defer c.mu.Unlock()
	p, s := c.peek()
	if s == nil {
		return false
	}
	if e != nil {
		r.fill(e, cpu, p, s)
	}
	if consume {
		c.advance(p, s)
	}
	return true
}

// Consume removes the oldest record — the smallest time stamp of all CPUs
// (cpu < 0) or of one CPU, the lowest CPU on a tie — and copies it into e.
// lost is the number of records overwritten on e.CPU since the consumer
// last moved to a new page there, and of those dropped there just before
// this one (Drop), which trace_pipe prints before the entry as
// "CPU:N [LOST n EVENTS]". ok is false when there is nothing to read.
//
// Consumers are served one at a time, so each record goes to exactly one
// of several concurrent consumers.
func (r *Ring) Consume(e *Entry, cpu int) (lost uint64, ok bool) {
	r.consumeMu.Lock()
	defer r.consumeMu.Unlock()
	return r.consumeLocked(e, cpu)
}

func (r *Ring) consumeLocked(e *Entry, cpu int) (lost uint64, ok bool) {
	for {
		best, l := r.next(cpu)
		if best < 0 {
			return 0, false
		}
		if r.take(best, e, true) {
			return l, true
		}
	}
}

// ConsumeWait is Consume that waits until there is a record or ctx is
// done.
func (r *Ring) ConsumeWait(ctx context.Context, e *Entry, cpu int) (lost uint64, err error) {
	for {
		r.waiters.Add(1)
		ch := r.waitChan()
		lost, ok := r.Consume(e, cpu)
		if ok {
			r.waiters.Add(-1)
			return lost, nil
		}
		select {
		case <-ch:
			r.waiters.Add(-1)
		case <-ctx.Done():
			r.waiters.Add(-1)
			return 0, ctx.Err()
		}
	}
}

// Empty reports whether there is nothing to consume on any CPU (cpu < 0)
// or on one (trace_empty).
func (r *Ring) Empty(cpu int) bool {
	for i, c := range r.cpus {
		if cpu >= 0 && i != cpu {
			continue
		}
		c.mu.Lock()
		empty := c.empty()
		c.mu.Unlock()
		if !empty {
			return false
		}
	}
	return true
}

// Pipe is an open trace_pipe (cpu < 0) or per_cpu/cpuN/trace_pipe: a
// consuming reader that returns text as tracing_read_pipe does.
type Pipe struct {
	r        *Ring
	cpu      int
	nonblock bool

	mu      sync.Mutex // iter->mutex: one read at a time
	seq     []byte     // text prepared and not yet returned
	readpos int
	read    bool // something was read (iter->pos != 0)
	closed  bool
	e       Entry

	// pollWake is the callback of the Poll waiting for this pipe, if one is:
	// a client polling in a loop replaces it rather than adding waiters.
	pollWake func()
}

// OpenPipe opens trace_pipe (cpu < 0) or per_cpu/cpuN/trace_pipe. Only one
// reader may have a CPU's buffer open: opening trace_pipe while it or any
// per-CPU trace_pipe is open, or a per-CPU one while trace_pipe or the
// same CPU's is open, fails with EBUSY (open_pipe_on_cpu, Linux 6.12).
// With nonblock, Read returns EAGAIN instead of waiting (O_NONBLOCK).
func (r *Ring) OpenPipe(cpu int, nonblock bool) (*Pipe, error) {
	if cpu >= len(r.cpus) {
		return nil, fmt.Errorf("trace_pipe of cpu %d: %w", cpu, unix.ENODEV)
	}
	if cpu < 0 {
		cpu = -1
	}
	r.pipeMu.Lock()
	defer r.pipeMu.Unlock()
	busy := r.pipeAll
	if cpu < 0 {
		for _, b := range r.pipeCPU {
			busy = busy || b
		}
	} else {
		busy = busy || r.pipeCPU[cpu]
	}
	if busy {
		return nil, fmt.Errorf("trace_pipe: %w", unix.EBUSY)
	}
	if cpu < 0 {
		r.pipeAll = true
	} else {
		r.pipeCPU[cpu] = true
	}
	return &Pipe{r: r, cpu: cpu, nonblock: nonblock}, nil
}

// Close releases the pipe. Text prepared by a read and not yet returned is
// lost; so are the records it came from, which were consumed.
func (p *Pipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.r.pipeMu.Lock()
	if p.cpu < 0 {
		p.r.pipeAll = false
	} else {
		p.r.pipeCPU[p.cpu] = false
	}
	p.r.pipeMu.Unlock()
	p.r.wakeAll()
	return nil
}

// Read reads text into b as read(2) of trace_pipe does (tracing_read_pipe):
//
//   - text left from the previous read is returned first, and alone;
//   - otherwise it waits until a record is there (EAGAIN with nonblock;
//     ctx's error when ctx is done), then formats whole lines, consuming
//     each record it formats, until it has at least len(b) bytes (at most
//     TraceSeqSize-1) or the next line does not fit in TraceSeqSize bytes,
//     and returns the first len(b) of them, keeping the rest for the next
//     read;
//   - it returns io.EOF when the buffer is empty, tracing is off and this
//     pipe has read something before.
//
// A line longer than TraceSeqSize is replaced by "[LINE TOO BIG]". Lines
// are preceded by "CPU:N [LOST n EVENTS]" after overruns.
func (p *Pipe) Read(ctx context.Context, b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, fmt.Errorf("trace_pipe: %w", unix.EBADF)
	}
	if len(b) == 0 {
		return 0, nil
	}
	if p.readpos < len(p.seq) {
		n := copy(b, p.seq[p.readpos:])
		p.readpos += n
		return n, nil
	}
	p.seq, p.readpos = p.seq[:0], 0
	cnt := min(len(b), TraceSeqSize-1)
	r := p.r
	for {
		if err := p.wait(ctx); err != nil {
			return 0, err
		}
		if p.closed {
			return 0, fmt.Errorf("trace_pipe: %w", unix.EBADF)
		}
		p.seq, p.readpos = p.seq[:0], 0
		if r.Empty(p.cpu) && !r.dropsAfter(p.cpu) {
			return 0, io.EOF
		}
		p.read = true
		r.consumeMu.Lock()
		for {
			best, lost := r.next(p.cpu)
			if best < 0 {
				// Drops after the last record: said at the end.
				if len(p.seq) < cnt {
					p.seq = r.appendDropsAfter(p.seq, p.cpu, true)
				}
				break
			}
			if !r.take(best, &p.e, false) {
				break
			}
			save := len(p.seq)
			if lost != 0 {
				p.seq = AppendLost(p.seq, best, lost)
			}
			p.seq = AppendLine(p.seq, &p.e)
			if len(p.seq) > TraceSeqSize {
				p.seq = p.seq[:save]
				if save == 0 {
					p.seq = append(p.seq, "[LINE TOO BIG]\n"...)
					r.take(best, nil, true)
				}
				break
			}
			r.take(best, nil, true)
			if len(p.seq) >= cnt {
				break
			}
		}
		r.consumeMu.Unlock()
		n := copy(b[:cnt], p.seq)
		p.readpos = n
		if p.readpos >= len(p.seq) {
			p.seq, p.readpos = p.seq[:0], 0
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Poll is tracing_poll_pipe: it reports whether a read would find text
// without waiting. If not and wake is non-nil, wake is called once, from
// another goroutine, when that may have changed: a record or a drop arrives,
// tracing is turned off, or the pipe is closed. Polling again before then
// replaces wake instead of adding a waiter, so a client that polls in a loop
// holds one goroutine at most.
func (p *Pipe) Poll(wake func()) bool {
	r := p.r
	ready := func() bool {
		return p.closed || p.readpos < len(p.seq) || !r.Empty(p.cpu) || r.dropsAfter(p.cpu) ||
			(!r.TracingOn() && p.read)
	}
	// p.mu is held by a blocked Read only while it formats: wait lets go.
	p.mu.Lock()
	defer p.mu.Unlock()
	if ready() || wake == nil {
		return ready()
	}
	if p.pollWake != nil {
		p.pollWake = wake
		return false
	}
	r.waiters.Add(1)
	ch := r.waitChan()
	// Checked again now that a waiter is counted: a record that came in
	// between found no waiter and woke no one.
	if ready() {
		r.waiters.Add(-1)
		return true
	}
	p.pollWake = wake
	go func() {
		<-ch
		r.waiters.Add(-1)
		p.mu.Lock()
		w := p.pollWake
		p.pollWake = nil
		p.mu.Unlock()
		w()
	}()
	return false
}

// Wait returns once Read would not wait — text left from a read, a
// record, a drop, tracing off after a read, the pipe closed — with ctx's
// error when ctx is done first, or EAGAIN for a nonblocking pipe with
// nothing: what Read waits for, without reading, so that a server can take
// a buffer for the read only once there is something to put in it.
func (p *Pipe) Wait(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.readpos < len(p.seq) {
		return nil
	}
	return p.wait(ctx)
}

// wait is tracing_wait_pipe. It lets go of p.mu while it waits, so that
// Close can run; a Close wakes it.
func (p *Pipe) wait(ctx context.Context) error {
	r := p.r
	for {
		r.waiters.Add(1)
		ch := r.waitChan()
		if p.closed || !r.Empty(p.cpu) || r.dropsAfter(p.cpu) {
			r.waiters.Add(-1)
			return nil
		}
		if p.nonblock {
			r.waiters.Add(-1)
			return fmt.Errorf("trace_pipe: %w", unix.EAGAIN)
		}
		if !r.TracingOn() && p.read {
			r.waiters.Add(-1)
			return nil
		}
		p.mu.Unlock()
		select {
		case <-ch:
			r.waiters.Add(-1)
			p.mu.Lock()
		case <-ctx.Done():
			r.waiters.Add(-1)
			p.mu.Lock()
			return ctx.Err()
		}
	}
}
