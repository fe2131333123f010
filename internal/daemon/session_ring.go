package daemon

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Session rings: a session's records handed to its reader through shared
// memory, as perf's mmap rings hand the kernel's — the daemon produces into
// a ring it creates (it owns the memfd, sealed against resizing), the
// reader maps it and consumes without a system call per record (see
// subsys.Session.DeliverToRing for the record kinds, and internal/shmring
// for the ring). The requests (wire.go has the protocol):
//
//	SessionRing  arg: session handle. Body: u32 the ring's data bytes
//	             (rounded up to a power of two from the page size; at
//	             most MaxSessionRing). Before the session is attached to
//	             anything. Reply: Result, and on success SCM_RIGHTS with
//	             the ring's memfd. A daemon before session rings answers
//	             EPROTO ("unknown request"): the reader then reads with
//	             SessionRead, as it does when the ring is refused.
//	SessionSync  arg: session handle; flags: 1 = do not deliver first.
//	             No body. The daemon delivers what clients published into
//	             their rings before the request (unless told not to),
//	             writes the session's pending lost runs into the session's
//	             ring if they fit, and answers Result followed by u64 lost
//	             and u64 too large: the runs that did not fit, handed over
//	             (the daemon forgets them; the reader counts them). Lost
//	             runs otherwise wait for the next record that fits: a
//	             reader whose ring stays empty asks, so that its counts do
//	             not wait for a record that may never come.
//
// The numbers are apart from the other requests' so that requests added
// there do not collide with them.
const (
	opSessionRing uint16 = 32 + iota
	opSessionSync
)

// flagNoFlush is SessionSync's flag: only the losses, no delivery first.
const flagNoFlush = 1

// MaxSessionRing is the largest session ring a reader may ask for: the
// daemon maps it twice (internal/shmring), in its own address space.
const MaxSessionRing = maxSessionBuffer

// sessionRing serves SessionRing: makes the ring, makes the session
// deliver into it, and sends the memfd.
func (c *conn) sessionRing(h header, body []byte) bool {
	ss, ok := c.handles[h.arg].(*subsys.Session)
	if !ok {
		return c.result(0, fmt.Errorf("session ring: bad session %d: %w", h.arg, unix.EBADF))
	}
	if len(body) != 4 {
		return c.result(0, fmt.Errorf("session ring: the body is %d bytes, not a u32 size: %w", len(body), unix.EINVAL))
	}
	size, err := ringSize(le.Uint32(body))
	if err != nil {
		return c.result(0, err)
	}
	// The ring counts with the session's buffer against its uid's
	// Limits.SessionKBPerUID, as perf's mmap pages count against
	// perf_event_mlock_kb.
	if err := c.addSession(0, int64(size)); err != nil {
		return c.result(0, c.overLimit(err))
	}
	p, err := shmring.Create(size)
	if err == nil {
		if err = ss.DeliverToRing(p); err != nil {
			p.Close()
		}
	}
	if err != nil {
		c.addSession(0, -int64(size))
		return c.result(0, err)
	}
	c.sessBytes[ss] += int64(size)
	ok = c.replyRights(appendResult(c.out[:0], 0, nil), p.Fd())
	// The reader has its descriptor, or is gone: the session keeps the
	// mapping, and it goes with the session.
	p.CloseFd()
	return ok
}

// ringSize is the data size a SessionRing request gets: n rounded up to a
// power of two, at least a page.
func ringSize(n uint32) (int, error) {
	if n > MaxSessionRing {
		return 0, fmt.Errorf("session ring: %d bytes asked, at most %d: %w", n, MaxSessionRing, unix.EINVAL)
	}
	size := os.Getpagesize()
	for size < int(n) {
		size <<= 1
	}
	return size, nil
}

// sessionSync serves SessionSync.
func (c *conn) sessionSync(h header, body []byte) bool {
	ss, ok := c.handles[h.arg].(*subsys.Session)
	if !ok || len(body) != 0 {
		return c.result(0, fmt.Errorf("session sync: bad session %d: %w", h.arg, unix.EBADF))
	}
	if h.flags&flagNoFlush == 0 {
		c.s.Flush()
	}
	lost, big := ss.TakeLost()
	out := appendResult(c.out[:0], 0, nil)
	out = le.AppendUint64(out, lost)
	out = le.AppendUint64(out, big)
	c.out = out[:0]
	return c.reply(out)
}

// replyRights is reply with a descriptor.
func (c *conn) replyRights(b []byte, fd int) bool {
	if now := time.Now(); c.deadline.Sub(now) < c.s.timeout/2 {
		c.deadline = now.Add(c.s.timeout)
		c.c.SetWriteDeadline(c.deadline)
	}
	if _, _, err := c.c.WriteMsgUnix(b, unix.UnixRights(fd), nil); err != nil {
		c.log.Warn("write", "err", err)
		return false
	}
	return true
}

// ---- the reader's side ----

// ErrRingEmpty is SessionRing.Next's answer when no record is waiting.
var ErrRingEmpty = shmring.ErrNotReady

// A SessionRing is the reading end of a session's ring: records arrive
// without a request each. It is for one goroutine, beside the session's
// Client, which its Sync uses.
type SessionRing struct {
	s    *Session
	cons *shmring.Consumer
	buf  []byte
	bad  uint64
}

// RingRecord is one record of a session's ring.
type RingRecord struct {
	// Kind is subsys.RingSample, RingComm (a task's name: Raw, ID 0) or
	// RingLost (Lost records, the first of event ID at TS on CPU).
	Kind uint32
	Record
	Lost     uint64
	TooLarge bool // the lost records exceeded perf's raw sample limit
}

// ringReadBuf is a buffer that holds any record the daemon writes: a
// sample's raw data is at most perf's limit (8 KiB; the daemon drops and
// counts larger ones), plus the ring's and the kind's headers.
const ringReadBuf = 16 << 10

// ShareRing asks the daemon to deliver the session's records into a ring
// of size bytes shared with this process, and maps it. It must come before
// the session is attached to anything. A daemon that predates session
// rings answers EPROTO and one that refuses the ring another errno: the
// session is then unchanged and is read with Read and Poll.
func (s *Session) ShareRing(size int) (*SessionRing, error) {
	if size < 0 || size > MaxSessionRing {
		return nil, fmt.Errorf("session ring: %d bytes asked, at most %d: %w", size, MaxSessionRing, unix.EINVAL)
	}
	c := s.c
	msg := le.AppendUint32(appendHeader(make([]byte, 0, headerSize+4), opSessionRing, 0, s.handle), uint32(size))
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, unix.EBADF
	}
	if err := c.send(msg); err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("session ring: %w", err)
	}
	r, fds, err := c.recvRights(c.rbuf[:])
	c.mu.Unlock()
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("session ring: %w", err)
	}
	if _, _, err := parseResult(r); err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		return nil, fmt.Errorf("session ring: the reply carried %d descriptors: %w", len(fds), errProtocol)
	}
	cons, err := shmring.Attach(fds[0])
	if err != nil {
		return nil, fmt.Errorf("session ring: %w", err)
	}
	return &SessionRing{s: s, cons: cons, buf: make([]byte, min(ringReadBuf, cons.Size()))}, nil
}

// recvRights is recv for a reply that may carry descriptors.
func (c *Client) recvRights(buf []byte) ([]byte, []int, error) {
	var oob [64]byte
	for {
		n, oobn, flags, _, err := unix.Recvmsg(c.fd, buf, oob[:], unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		fds := rights(oob[:oobn])
		switch {
		case n == 0 && oobn == 0:
			return nil, fds, fmt.Errorf("the daemon closed the connection: %w", unix.ECONNRESET)
		case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
			return nil, fds, fmt.Errorf("reply larger than %d bytes: %w", len(buf), errProtocol)
		}
		return buf[:n], fds, nil
	}
}

// Next returns the next record, or ErrRingEmpty. Its Raw is valid until
// the next call. A record the daemon should not have written (an unknown
// kind, a payload too short for its kind) is skipped and counted in Bad.
func (r *SessionRing) Next() (RingRecord, error) {
	for {
		rec, err := r.cons.Next(r.buf)
		if err != nil {
			return RingRecord{}, err
		}
		out, err := decodeRingRecord(rec)
		if err != nil {
			r.bad++
			continue
		}
		return out, nil
	}
}

// decodeRingRecord reads one record of a session ring (the layout is in
// subsys/session_ring.go).
func decodeRingRecord(rec shmring.Record) (RingRecord, error) {
	ne := binary.NativeEndian
	p := rec.Payload
	out := RingRecord{Kind: rec.WriteIndex}
	out.TS, out.TID, out.CPU = rec.Time, int32(rec.TID), int32(rec.CPU)
	switch rec.WriteIndex {
	case subsys.RingSample, subsys.RingComm:
		min := 8
		if rec.WriteIndex == subsys.RingSample {
			min += 8 // the common header
		}
		if len(p) < min {
			return RingRecord{}, fmt.Errorf("session ring: a record of kind %d with %d bytes: %w", rec.WriteIndex, len(p), errProtocol)
		}
		out.PID, out.ID, out.Raw = int32(ne.Uint32(p)), int(ne.Uint32(p[4:])), p[8:]
		if rec.WriteIndex == subsys.RingComm && out.ID != 0 {
			return RingRecord{}, fmt.Errorf("session ring: a task name with type id %d: %w", out.ID, errProtocol)
		}
	case subsys.RingLost:
		if len(p) != 16 {
			return RingRecord{}, fmt.Errorf("session ring: a lost record of %d bytes: %w", len(p), errProtocol)
		}
		out.TID = 0
		out.Lost, out.ID = ne.Uint64(p), int(ne.Uint32(p[8:]))
		out.TooLarge = ne.Uint32(p[12:])&subsys.RingLostTooLarge != 0
	default:
		return RingRecord{}, fmt.Errorf("session ring: record kind %d: %w", rec.WriteIndex, errProtocol)
	}
	return out, nil
}

// Size is the ring's data size in bytes.
func (r *SessionRing) Size() int { return r.cons.Size() }

// Pending is how many bytes of records wait in the ring.
func (r *SessionRing) Pending() int { return r.cons.Pending() }

// Wait sleeps until records are there, or for at most timeout, and
// reports whether one is. The daemon wakes a sleeping reader with a futex:
// at once for a record after a quiet spell, and while records keep coming
// about once a millisecond or when an eighth of the ring waits, so that the
// reader takes them in batches (the last records of a burst may wait for
// the timeout).
func (r *SessionRing) Wait(timeout time.Duration) bool { return r.cons.Wait(timeout) }

// Sync returns once what clients published into their rings before the
// call is in this ring, with what the session lost that is not in the
// ring (it had no room for the lost record): the caller counts that.
func (r *SessionRing) Sync() (lost, tooLarge uint64, err error) {
	return r.sync(0)
}

// TakeLost is Sync without the delivery: the session's losses that wait
// for a record to follow them into the ring are written there now if they
// fit, and the rest handed over. A reader whose ring has been empty for a
// while calls it, so that its lost count is up to date.
func (r *SessionRing) TakeLost() (lost, tooLarge uint64, err error) {
	return r.sync(flagNoFlush)
}

func (r *SessionRing) sync(flags uint16) (lost, tooLarge uint64, err error) {
	_, rest, err := r.s.c.call(appendHeader(nil, opSessionSync, flags, r.s.handle))
	if err != nil {
		return 0, 0, fmt.Errorf("session sync: %w", err)
	}
	if len(rest) != 16 {
		return 0, 0, fmt.Errorf("session sync: a reply of %d bytes: %w", len(rest), errProtocol)
	}
	return le.Uint64(rest), le.Uint64(rest[8:]), nil
}

// Bad is how many records Next skipped as malformed, and the ring's own
// counts of bytes it could not take as records.
func (r *SessionRing) Bad() (records, discardedBytes uint64) {
	return r.bad, r.cons.Stats().Discarded
}

// Close unmaps the ring. The session goes on delivering into the daemon's
// side until it is closed.
func (r *SessionRing) Close() error { return r.cons.Close() }
