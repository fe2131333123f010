package fuse

import (
	"time"

	"golang.org/x/sys/unix"
)

// InlineWriter is a Handle whose writes the server may answer on the
// goroutine that read the request, as libfuse's workers answer theirs, with
// no goroutine started and no hand-off: a FUSE write round trip is then one
// wakeup of the server and one of the caller, which is what a write(2) of
// user_events_data from a program the interposer cannot reach costs.
//
// InlineWrites promises that Write returns within microseconds: it waits
// for no other request, no client and no lock held long, only for short
// system calls. A Write that waits anyway — for a page fault in a caller's
// memory that nobody serves, say — holds up the connection's other requests
// only until the server notices (watchTick, a few ms): another goroutine
// then reads them. If it still has not returned after StallLimit, the
// server answers it EFAULT itself, and Request.Commit says so to the
// handler when it returns. Such a write is not interruptible: INTERRUPT
// does not cancel its ctx, as it would a write handled in a goroutine of
// its own.
type InlineWriter interface {
	InlineWrites() bool
}

// StallLimit is how long an inline write may take before the server answers
// it EFAULT itself (see InlineWriter): the time package procmem gives an
// access to a caller's memory.
const StallLimit = time.Second

const (
	// watchTick is how often the watchdog looks at the readers while
	// requests are answered inline.
	watchTick = 5 * time.Millisecond
	// takeoverTicks: a request handled inline for this many ticks in a
	// row (2 ticks: 5 to 10 ms) hands the reading to a new reader.
	takeoverTicks = 2
	// stallTicks: and after this many, it is answered EFAULT.
	stallTicks = int(StallLimit/watchTick) + 1
	// idleTicks: the watchdog ends after this many ticks that saw no
	// request handled inline; the next one starts it again.
	idleTicks = 200
)

// A reader's claim on the request it handles inline is seq<<2 | one of:
const (
	claimHandling  = 0 // the handler may still answer
	claimCommitted = 1 // the handler answers (Request.Commit)
	claimAbandoned = 2 // the watchdog answered EFAULT; the handler's answer is dropped
)

// retired is a reader's busy once the watchdog gave its reading to another.
const retired = ^uint64(0)

// inline says whether a WRITE of caller pid, read after waiting or not, is
// answered inline: when nothing else was queued (the read waited), or when
// the request is the next one of the caller just answered (who may have
// made it before this goroutine got back to its read, on another CPU or by
// preempting it). A request of another caller found queued says that
// several are writing: it gets a goroutine, so that they are answered in
// parallel.
func (r *reader) inline(pid uint32, waited bool) bool {
	return waited || pid == r.lastPid
}

// writeInline answers WRITE m of h on this goroutine, and reports whether
// the reader was retired meanwhile (it must then read no more).
func (r *reader) writeInline(m *message, h Handle) (retiredNow bool) {
	c := r.c
	r.seq++
	seq := r.seq
	r.lastPid = m.pid
	r.unique.Store(m.unique)
	r.claim.Store(seq << 2)
	c.handlers.Add(1)
	c.inlineBusy.Add(1)
	r.busy.Store(seq)
	c.watch()
	// The reader's Request, not one of its own (that would be allocated
	// at each write): the handler does not keep it, and a reader whose
	// handler stalls reads no more (it is retired).
	req := &r.req
	*req = Request{Unique: m.unique, Pid: m.pid, Uid: m.uid, Gid: m.gid, claim: &r.claim, seq: seq}
	// c.ctx, not a context of the request's own: INTERRUPT cannot reach
	// a request nobody reads requests for (see InlineWriter).
	n, e := c.writeOp(c.ctx, req, h, m)
	if req.Commit() {
		r.replyWrite(m.unique, n, e)
		c.handlers.Done()
	} // else the watchdog answered it, and counted it done
	c.inlineBusy.Add(-1)
	r.yield = true
	return !r.busy.CompareAndSwap(seq, 0)
}

// replyWrite writes WRITE's answer: n bytes written, or errno.
func (r *reader) replyWrite(unique uint64, n uint32, errno unix.Errno) {
	r.outLen = outHeaderSize
	if errno == 0 {
		r.outLen += writeOutSize
		le.PutUint32(r.out[outHeaderSize:], n)
		le.PutUint32(r.out[outHeaderSize+4:], 0) // padding
	}
	le.PutUint32(r.out[0:], uint32(r.outLen))
	le.PutUint32(r.out[4:], uint32(-int32(errno)))
	le.PutUint64(r.out[8:], unique)
	err := r.c.raw.Write(r.writeFn)
	if err == nil {
		err = r.werr
	}
	if err != nil && err != unix.ENOENT {
		r.c.debugf("fuse: reply to %d: %v", unique, err)
	}
}

// Commit reports whether the request's handler answers it, and makes it so
// for good. It is false only for an InlineWriter's write that the server
// answered EFAULT itself after StallLimit: the handler, which calls Commit
// before it makes what its answer says it made (a record written), must
// then make nothing. Any other request is always its handler's.
func (r *Request) Commit() bool {
	if r.claim == nil {
		return true
	}
	s := r.seq << 2
	return r.claim.CompareAndSwap(s|claimHandling, s|claimCommitted) || r.claim.Load() == s|claimCommitted
}

// watch starts the watchdog if it does not run.
func (c *Conn) watch() {
	if c.watching.Load() || !c.watching.CompareAndSwap(false, true) {
		return
	}
	go c.watchdog()
}

// stopWatch ends the watchdog for good (the connection has ended and no
// request is being answered).
func (c *Conn) stopWatch() {
	close(c.unwatch)
}

// watchdog looks at the readers every watchTick while requests are answered
// inline, and ends after idleTicks that saw none (watch starts it again).
func (c *Conn) watchdog() {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-c.unwatch:
			return
		case <-t.C:
		}
		if c.tick() {
			idle = 0
			continue
		}
		if idle++; idle < idleTicks {
			continue
		}
		// Ending: a reader that began a request before it saw watching
		// false started no watchdog, and is seen busy here.
		c.watching.Store(false)
		if !c.anyBusy() || !c.watching.CompareAndSwap(false, true) {
			return
		}
		idle = 0
	}
}

func (c *Conn) anyBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.readers {
		if r.busy.Load() != 0 {
			return true
		}
	}
	return false
}

// tick is one look of the watchdog at the readers: a request answered
// inline for takeoverTicks in a row hands the reading to a new reader, one
// still not answered after stallTicks is answered EFAULT. It reports
// whether any reader was answering a request.
func (c *Conn) tick() bool {
	var answer []uint64
	c.mu.Lock()
	busy := false
	start := 0
	for _, r := range c.readers {
		b := r.busy.Load()
		if b == 0 {
			r.seen, r.ticks = 0, 0
			continue
		}
		busy = true
		seq := r.claim.Load() >> 2
		if seq != r.seen {
			r.seen, r.ticks = seq, 0
			continue
		}
		r.ticks++
		if r.ticks >= takeoverTicks && b != retired && r.busy.CompareAndSwap(b, retired) {
			start++
		}
		if r.ticks == stallTicks {
			s := seq << 2
			if r.claim.CompareAndSwap(s|claimHandling, s|claimAbandoned) {
				answer = append(answer, r.unique.Load())
			}
		}
	}
	c.mu.Unlock()
	for range start {
		c.debugf("fuse: a write answered inline takes more than %v: another goroutine reads the requests", takeoverTicks*watchTick)
		go c.readLoop(c.newReader())
	}
	for _, u := range answer {
		c.debugf("fuse: a write answered inline took more than %v: answered EFAULT", StallLimit)
		c.reply(u, unix.EFAULT)
		c.handlers.Done()
	}
	return busy
}
