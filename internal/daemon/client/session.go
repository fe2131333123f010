package client

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// Session is a perf-like consumer in the daemon.
type Session struct {
	c      *Conn
	handle uint32
	buf    []byte // the last reply, which the last records alias
}

// Record is one record a Session read.
type Record struct {
	TS  uint64 // trace clock, ns
	PID int32
	TID int32
	CPU int32
	ID  int // the event's type ID
	// Raw is the 8-byte common header and the payload; for ID 0, a task's
	// name (SessionOptions.Comm), NUL-terminated and NUL-padded.
	Raw []byte
}

// SessionOptions configure a session (see subsys.SessionOptions).
type SessionOptions struct {
	BufferBytes int  // bound of the records waiting to be read (0: 1 MiB)
	Other       bool // count as an "other" consumer instead of perf
	Comm        bool // records of the writers' names (Record ID 0)
}

// NewSession opens a session.
func (c *Conn) NewSession(opts SessionOptions) (*Session, error) {
	var flags uint16
	if opts.Other {
		flags |= wire.FlagOther
	}
	if opts.Comm {
		flags |= wire.FlagComm
	}
	ret, _, err := c.call(wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, flags, 0), uint32(opts.BufferBytes)))
	if err != nil {
		return nil, err
	}
	return &Session{c: c, handle: uint32(ret)}, nil
}

// Attach attaches the session to the events pattern selects (see
// subsys.MatchEvent), and with follow to those created later. It returns
// the attached events as "system:tracepoint".
func (s *Session) Attach(pattern string, follow bool) ([]string, error) {
	var flags uint16
	if follow {
		flags = wire.FlagFollow
	}
	data, err := s.c.callData(append(wire.AppendHeader(nil, wire.OpAttach, flags, s.handle), pattern...))
	if err != nil {
		return nil, err
	}
	var names []string
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != 0 {
			i++
		}
		names = append(names, string(data[:i]))
		data = data[min(i+1, len(data)):]
	}
	return names, nil
}

// SetFilter sets the session's filter for the event "system:tracepoint",
// as PERF_EVENT_IOC_SET_FILTER sets a perf event's (see
// subsys.Session.SetFilter): errors are the kernel's (EINVAL for a bad
// filter, EEXIST for a second one), ENOENT for no such event.
func (s *Session) SetFilter(event, filter string) error {
	msg := wire.AppendHeader(nil, wire.OpSetFilter, 0, s.handle)
	msg = append(append(append(msg, event...), 0), filter...)
	_, _, err := s.c.call(msg)
	return err
}

// Read waits for records and appends them to dst, with the counts of
// records lost to a full buffer and dropped as too large so far. The
// records' Raw data is valid until the session's next Read or Poll.
// Cancelling ctx ends the wait by shutting the connection down: the Conn
// is unusable afterwards (Poll does not wait).
func (s *Session) Read(ctx context.Context, dst []Record) (recs []Record, lost, tooLarge uint64, err error) {
	stop := context.AfterFunc(ctx, func() { unix.Shutdown(s.c.fd, unix.SHUT_RDWR) })
	defer stop()
	data, err := s.read(0)
	if err != nil {
		if ctx.Err() != nil {
			return dst, 0, 0, ctx.Err()
		}
		return dst, 0, 0, err
	}
	return parseRecords(data, dst)
}

// Poll is Read without the wait: the records already waiting, perhaps none.
// Unlike a cancelled Read it leaves the connection usable.
func (s *Session) Poll(dst []Record) (recs []Record, lost, tooLarge uint64, err error) {
	data, err := s.read(wire.FlagNoWait)
	if err != nil {
		return dst, 0, 0, err
	}
	return parseRecords(data, dst)
}

// read asks for records into the session's reply buffer.
func (s *Session) read(flags uint16) ([]byte, error) {
	if s.buf == nil {
		s.buf = make([]byte, wire.MaxMessage)
	}
	var msg [wire.HeaderSize + 4]byte
	return s.c.callDataInto(wire.LE.AppendUint32(wire.AppendHeader(msg[:0], wire.OpSessionRead, flags, s.handle), wire.MaxMessage), s.buf)
}

// parseRecords reads a SessionRead reply: the lost and too-large counts,
// then records, each 8-byte aligned.
func parseRecords(data []byte, dst []Record) (recs []Record, lost, tooLarge uint64, err error) {
	if len(data) < 16 {
		return dst, 0, 0, wire.ErrProtocol
	}
	lost, tooLarge = wire.LE.Uint64(data), wire.LE.Uint64(data[8:])
	data = data[16:]
	for len(data) > 0 {
		if len(data) < wire.RecordHeaderLen {
			return dst, lost, tooLarge, wire.ErrProtocol
		}
		n := int(wire.LE.Uint32(data[24:]))
		if n > len(data)-wire.RecordHeaderLen {
			return dst, lost, tooLarge, wire.ErrProtocol
		}
		dst = append(dst, Record{
			TS: wire.LE.Uint64(data), PID: int32(wire.LE.Uint32(data[8:])), TID: int32(wire.LE.Uint32(data[12:])),
			CPU: int32(wire.LE.Uint32(data[16:])), ID: int(wire.LE.Uint32(data[20:])),
			Raw: data[wire.RecordHeaderLen : wire.RecordHeaderLen+n],
		})
		adv := wire.RecordHeaderLen + n
		adv += (8 - adv%8) % 8
		data = data[min(adv, len(data)):]
	}
	return dst, lost, tooLarge, nil
}

// Close closes the session.
func (s *Session) Close() error {
	_, _, err := s.c.call(wire.AppendHeader(nil, wire.OpCloseFile, 0, s.handle))
	return err
}

// recvRights is recv for a reply that may carry descriptors.
func (c *Conn) recvRights(buf []byte) ([]byte, []int, error) {
	var oob [64]byte
	for {
		n, oobn, flags, _, err := unix.Recvmsg(c.fd, buf, oob[:], unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		fds := wire.Rights(oob[:oobn])
		switch {
		case n == 0 && oobn == 0:
			return nil, fds, fmt.Errorf("the daemon closed the connection: %w", unix.ECONNRESET)
		case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
			return nil, fds, fmt.Errorf("reply larger than %d bytes: %w", len(buf), wire.ErrProtocol)
		}
		return buf[:n], fds, nil
	}
}

// askStreams sends the SessionStreams request for streams of size bytes
// each, and returns the memfd its reply carries.
func (s *Session) askStreams(size int) (int, error) {
	if size < 0 || size > wire.MaxSessionRing {
		return -1, fmt.Errorf("session streams: %d bytes asked, at most %d: %w", size, wire.MaxSessionRing, unix.EINVAL)
	}
	msg := wire.LE.AppendUint32(wire.AppendHeader(make([]byte, 0, wire.HeaderSize+4), wire.OpSessionStreams, 0, s.handle), uint32(size))
	_, _, fds, err := s.c.callForRights(msg, func(int64) int { return 1 })
	if err != nil {
		return -1, fmt.Errorf("session streams: %w", err)
	}
	return fds[0], nil
}

// callForRights sends msg and returns its reply's result, the rest of its
// body and the descriptors it carried: as many as want says for the
// result, or ErrProtocol (and they are closed).
func (c *Conn) callForRights(msg []byte, want func(ret int64) int) (ret int64, rest []byte, fds []int, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, nil, nil, unix.EBADF
	}
	if err := c.send(msg); err != nil {
		c.mu.Unlock()
		return 0, nil, nil, err
	}
	r, fds, err := c.recvRights(c.rbuf[:])
	if err == nil {
		ret, rest, err = wire.ParseResult(r)
		rest = append([]byte(nil), rest...) // c.rbuf is the next call's
	}
	c.mu.Unlock()
	if err == nil && len(fds) != want(ret) {
		err = fmt.Errorf("the reply carried %d descriptors: %w", len(fds), wire.ErrProtocol)
	}
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return 0, nil, nil, err
	}
	return ret, rest, fds, nil
}

// SessionStreams are the reading end of a session's streams (ShareStreams):
// finished perf.data records, one stream per ring index of the daemon's,
// which the reader writes to its file as they lie.
type SessionStreams struct {
	s *Session
	*shmring.Streams
}

// ShareStreams asks the daemon to deliver the session's records into
// streams of size bytes each, one per ring index of the daemon's
// (Conn.Rings), shared with this process, and maps them. It must come
// before the session is attached to anything. A daemon that predates
// streams answers EPROTO (and one without ring sets has no ring count:
// EPROTONOSUPPORT here); one that refuses them another errno: the session
// is then unchanged.
func (s *Session) ShareStreams(size int) (*SessionStreams, error) {
	n := s.c.Rings()
	if n == 0 {
		return nil, fmt.Errorf("session streams: the daemon has no ring count (it predates ring sets): %w", unix.EPROTONOSUPPORT)
	}
	fd, err := s.askStreams(size)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	st, err := shmring.AttachStreams(fd, n)
	if err != nil {
		return nil, fmt.Errorf("session streams: %w", err)
	}
	return &SessionStreams{s: s, Streams: st}, nil
}

// Sync returns once what clients published into their rings before the
// call is in the streams, with what the session lost that is not in them
// (no room for the LOST record): the caller counts that. tooLarge is the
// session's count of records too large for perf, all of them, which the
// streams' LOST records counted without saying so.
func (st *SessionStreams) Sync() (lost, tooLarge uint64, err error) { return st.s.sync(0) }

// TakeLost is Sync without the delivery: the session's losses that wait
// for a record to follow them into a stream are written there now if they
// fit, and the rest handed over. A reader whose streams have been empty
// for a while calls it, so that its lost count is up to date.
func (st *SessionStreams) TakeLost() (lost, tooLarge uint64, err error) {
	return st.s.sync(wire.FlagNoFlush)
}

// sync is SessionSync.
func (s *Session) sync(flags uint16) (lost, tooLarge uint64, err error) {
	_, rest, err := s.c.call(wire.AppendHeader(nil, wire.OpSessionSync, flags, s.handle))
	if err != nil {
		return 0, 0, fmt.Errorf("session sync: %w", err)
	}
	if len(rest) != 16 {
		return 0, 0, fmt.Errorf("session sync: a reply of %d bytes: %w", len(rest), wire.ErrProtocol)
	}
	return wire.LE.Uint64(rest), wire.LE.Uint64(rest[8:]), nil
}

// A HandOver is a producer's ring set the daemon handed to the session's
// reader (Session.HandOver): the table and the producer, and the
// descriptors the caller now owns — the set's memfd, the control memfd,
// the set's wake eventfd — to map with package handover and close.
type HandOver struct {
	*wire.HandOver
	SetFd, ControlFd, WakeFd int
}

// Close closes the hand-over's descriptors.
func (h *HandOver) Close() {
	for _, fd := range []int{h.SetFd, h.ControlFd, h.WakeFd} {
		unix.Close(fd)
	}
}

// HandOver asks the daemon for a producer's ring set to read in place
// (wire.OpSessionHandOver), for a session that delivers into streams: nil
// when there is none to hand over now. A daemon before hand-overs, or one
// that will not hand over to this process, answers EPROTO.
func (s *Session) HandOver() (*HandOver, error) {
	msg := wire.AppendHeader(make([]byte, 0, wire.HeaderSize), wire.OpSessionHandOver, 0, s.handle)
	ret, rest, fds, err := s.c.callForRights(msg, func(ret int64) int {
		if ret == 1 {
			return 3
		}
		return 0
	})
	if err != nil {
		return nil, fmt.Errorf("session hand-over: %w", err)
	}
	switch ret {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("session hand-over: a result of %d: %w", ret, wire.ErrProtocol)
	}
	h := &HandOver{SetFd: fds[0], ControlFd: fds[1], WakeFd: fds[2]}
	if h.HandOver, err = wire.ParseHandOver(rest); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}
