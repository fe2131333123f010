// Package wire is the uetrace daemon's protocol: the messages a client and
// the daemon exchange over the daemon's SOCK_SEQPACKET socket, their
// limits, the socket's default place, and the records of the rings the two
// share (a client's writes, a session's records). Both ends import it: the
// server (package daemon) and the client (package client), which is all a
// producer links.
//
// It encodes and decodes; it neither dials nor serves.
package wire

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/procfs"
)

// The protocol (version 1). One SOCK_SEQPACKET message is one request or one
// reply; requests on a connection are answered in order, one reply each.
// Integers are little-endian — both ends are on one machine, and every
// architecture uetrace supports is little-endian.
//
// Every message starts with an 8-byte header:
//
//	u16 op     what the message is
//	u16 flags  op-specific
//	u32 arg    op-specific (a handle, a thread id, open flags)
//
// Requests (client → daemon) and their bodies:
//
//	Hello       magic "UETRACE\x00", u32 version, u32 0, u64 arena address,
//	            u64 arena size; with SCM_RIGHTS carrying the arena memfd when
//	            the size is not 0. Must be the first message.
//	Register    flags: 1 = the name is unreadable (EFAULT). u32 length of the
//	            struct user_reg bytes that follow, those bytes, then the name.
//	Unregister  the struct user_unreg bytes as the caller passed them.
//	Delete      the name.
//	Write       arg: the writer's thread id; flags: its CPU. Body: what the
//	            client's writev carried, [u32 write_index][payload].
//	Open        arg: open(2) flags. Body: a tracefs path. Reply: Result with
//	            the handle number.
//	Read        arg: handle. Body: u32 maximum bytes. Reply: Data. Blocks on
//	            trace_pipe until a record is there.
//	WriteHead   a write longer than MaxWrite : arg and flags
//	            as Write. Body: u32 the write's length, then its first
//	            MaxWrite-4 bytes. Answered as the whole write, which no
//	            consumer can take (the subsystem's File.WriteHead). A daemon before
//	            WriteHead answers EPROTO.
//	WriteFile   arg: handle. Body: the bytes to write.
//	CloseFile   arg: handle.
//	ReadDir     arg: the index of the first entry wanted. Body: a path.
//	            Reply: Data holding the entries from there that fit in a
//	            message, each u32 mode followed by the name and a NUL; none
//	            once past the last. The client asks again from the index
//	            after the last it got, as getdents goes on from its offset,
//	            so no listing is too large. A listing that fails part way
//	            (the subsystem's FS.ReadDir) answers its error past its entries.
//	Session     flags: 1 = count as "other" rather than perf. Body: u32
//	            buffer bytes. Reply: Result with the handle.
//	Attach      arg: session handle; flags: 1 = follow events created later.
//	            Body: a pattern (the subsystem's MatchEvent). Reply: Data with the
//	            attached events' "system:tracepoint" names, NUL-terminated.
//	Ring        arg: the version of what is shared: RingSet, a ring set of
//	            R rings (the HelloOK's R), one per CPU index, a record
//	            published into ring CPU mod R (version 1, one ring per
//	            producer, is no longer taken: EPROTONOSUPPORT). No body;
//	            SCM_RIGHTS carries the set's memfd (internal/shmring)
//	            that the client publishes its writes into without a system
//	            call, each record [write_index][payload] with the thread,
//	            CPU and CLOCK_MONOTONIC time, and the eventfd the client
//	            adds 1 to when it publishes while the daemon sleeps. A
//	            record of write index LostIndex counts records the client
//	            dropped, its ring full. At most one per connection;
//	            the daemon drains it into this connection's user_events_data
//	            (the write index is this connection's; the pid is the
//	            peer's), and before each Read and SessionRead delivers what
//	            every set holds. Reply: Result. A daemon before Ring
//	            answers EPROTO ("unknown request"), and the client writes
//	            with Write instead: the protocol version is unchanged.
//	SessionRead arg: session handle; flags: 1 = do not wait. Body: u32
//	            maximum bytes. Blocks until a record is there, unless told
//	            not to wait (then the reply may hold none). Reply: Data: u64 lost, u64 too large, then
//	            records of u64 time, i32 pid, i32 tid, i32 cpu, u32 type id,
//	            u32 length and the raw record padded to 8 bytes.
//	RingFlush   no body: deliver what the connection's ring set holds. Reply:
//	            Result once it is delivered.
//	SetFilter   arg: session handle. Body: "system:tracepoint", a NUL, and
//	            the filter text: the session's filter for that event, as
//	            PERF_EVENT_IOC_SET_FILTER (the subsystem's Session.SetFilter).
//	            Reply: Result. A daemon before SetFilter answers EPROTO.
//	SessionStreams, SessionSync
//	            a session's records through shared-memory streams the
//	            daemon creates and sends (SCM_RIGHTS): see OpSessionStreams.
//	Stats       no body: the daemon's counts (the server's Stats). Reply: Data,
//	            "name value" lines.
//
// Replies (daemon → client):
//
//	Result  body: i64 ret — the errno negated on failure — and on failure the
//	        error text. Register's adds u32 write_index.
//	Data    body: the bytes read.
//	HelloOK body: u32 version, u32 pid as the daemon sees it, u32 flags
//	        (1 = the daemon counts the caller as perfmon_capable, 2 = as a
//	        tracer: it may control tracing and read others' records), u32
//	        R: the rings of a ring set this daemon takes (Ring version
//	        2); a daemon before ring sets sends no R, read as 0.
//
// The names of the ops below are these requests' and replies', with Op before them.
const (
	OpHello uint16 = 1 + iota
	OpRegister
	OpUnregister
	OpDelete
	OpWrite
	OpOpen
	OpRead
	OpWriteFile
	OpCloseFile
	OpReadDir
	OpSession
	OpAttach
	OpSessionRead
	OpRing
	OpRingFlush
)

// A session's records handed to its reader through shared memory, as
// perf's mmap rings hand the kernel's: the daemon writes into streams it
// creates (it owns the memfd, sealed against resizing), the reader maps
// them and consumes without a system call per record (internal/shmring's
// streams). The requests:
//
//	SessionRing  retired (#31): a ring of the daemon's own record format,
//	             which the streams replaced. A daemon since answers EPROTO
//	             ("unknown request"); the number is not reused.
//	SessionSync  arg: session handle; flags: FlagNoFlush = do not deliver
//	             first. No body. The daemon delivers what clients
//	             published into their rings before the request (unless
//	             told not to), writes the session's pending lost runs into
//	             its streams if they fit, and answers Result
//	             followed by u64 lost and u64 too large: the runs that did
//	             not fit, handed over (the daemon forgets them; the reader
//	             counts them). Lost runs otherwise wait for the next record
//	             that fits: a reader whose streams stay empty asks, so that
//	             its counts do not wait for a record that may never come.
//
//	SessionStreams
//	             arg: session handle. Body: u32 each stream's data bytes
//	             (rounded up to a power of two from the page size; at
//	             most MaxSessionRing). Before the session is attached to
//	             anything. The daemon makes the session deliver into R
//	             streams (R is the HelloOK's; internal/shmring's streams):
//	             finished perf.data records, the records of CPU c in
//	             stream c mod R, which the reader writes to its file as
//	             they lie (stream.go has their layouts). Reply: Result,
//	             and on success SCM_RIGHTS with the streams' memfd. A
//	             daemon before streams answers EPROTO; the reader then
//	             reads with SessionRead. SessionSync answers for such a
//	             session with the losses not told in the streams, and
//	             in the too-large field the session's whole count of
//	             records too large for perf (told in the streams as lost).
//
// The numbers are apart from the other requests' so that requests added
// there do not collide with them.
const (
	OpSessionRing uint16 = 32 + iota // retired: see above
	OpSessionSync
	OpSessionStreams
)

// OpServeFUSE hands the daemon a /dev/fuse descriptor already mounted
// somewhere (by uetrace run's helper in a mount namespace, or by uetrace
// mount): no body, one descriptor (SCM_RIGHTS). The daemon serves its
// tracefs tree there; only tracers may. Reply: Result, once serving has
// begun.
const OpServeFUSE uint16 = 48

// OpSetFilter is numbered apart from the others, as the sessions'
// ops are.
const OpSetFilter uint16 = 64

// OpStats asks for the daemon's counts: no body; reply Data holding "name
// value" lines. A caller who is not a tracer gets the per-uid line of its
// own uid only. A daemon before it answers EPROTO.
const OpStats uint16 = 65

// OpWriteHead carries the head of a write longer than a message holds
// (WriteHead above); numbered apart, as OpSetFilter.
const OpWriteHead uint16 = 72

// Reply ops have the top bit set.
const (
	OpResult uint16 = 0x8000 + iota
	OpData
	OpHelloOK
)

// RingSet is the version of the Ring request (its arg) the daemon takes: a
// ring set of R rings (internal/shmring's sets). Version 1, one ring per
// producer, is retired.
const RingSet = 2

// Version is the protocol version this package speaks.
const Version = 1

// HelloMagic opens every Hello.
const HelloMagic = "UETRACE\x00"

const (
	// HeaderSize is the size of every message's header.
	HeaderSize = 8
	// HelloSize is the size of a Hello.
	HelloSize = HeaderSize + 8 + 4 + 4 + 8 + 8

	// MaxMessage is the largest message either side sends or accepts.
	// A SOCK_SEQPACKET message must fit the socket's send buffer, whose
	// default ceiling (net.core.wmem_max) is 208 KiB; 64 KiB leaves room.
	MaxMessage = 64 << 10

	// MaxWrite is the longest write (index and payload) a Write message
	// carries: what fits a message after the header. Of a longer one,
	// which Linux takes and drops — no consumer holds a record over 8 KiB
	// (ftrace ~4 KiB, perf 8 KiB) — a WriteHead message carries the first
	// MaxWrite-4 bytes and the length: all the daemon needs to answer it
	// as Linux does.
	MaxWrite = MaxMessage - HeaderSize

	// MaxIov is how many slices a client's Writev takes: its iovecs are a
	// fixed array on the stack, so that neither they nor the caller's
	// buffers escape.
	MaxIov = 16

	// RecordHeaderLen is the size of the header of each record in a
	// SessionRead reply.
	RecordHeaderLen = 8 + 4 + 4 + 4 + 4 + 4
)

// The flags of the requests and replies that have some.
const (
	FlagNameFault = 1 // Register: name_args unreadable
	FlagOther     = 1 // Session: an "other" consumer
	FlagComm      = 2 // Session: records of the writers' names
	FlagFollow    = 1 // Attach: follow new events
	FlagNoWait    = 1 // SessionRead: answer at once, with no records if none wait
	FlagNoFlush   = 1 // SessionSync: only the losses, no delivery first
	HelloPerfmon  = 1 // HelloOK: caller is perfmon_capable
	HelloTracer   = 2 // HelloOK: caller is a tracer
)

// MaxRing is the largest ring data area a client may share: a client
// chooses its ring's size, and the daemon maps it twice (see
// internal/shmring), so an unbounded one would let a client spend the
// daemon's address space.
const MaxRing = 64 << 20

// MaxSessionRing is the largest stream of a session a reader may ask for
// (SessionStreams' size: each of the R streams): the daemon maps each
// twice (internal/shmring), in its own address space.
const MaxSessionRing = 64 << 20

// LostIndex is the write index of a loss record in a client's ring: the
// client found its ring full and dropped records, and says so in band,
// where it happened, with the next record it could publish. Its payload
// is the event's u32 write index, 4 zero bytes and the u64 number of its
// records dropped. The daemon hands the count to the connection's
// user_events_data: the event's counts, the trace buffer's "LOST n EVENTS"
// and every session's lost count carry it. A client can only ever claim
// losses for its own connection's events, and no more than its producer
// could have dropped since it shared the ring.
const LostIndex = ^uint32(0)

// LostPayload is the size of a loss record's payload.
const LostPayload = 16

// LE is the protocol's byte order.
var LE = binary.LittleEndian

// PutHeader writes a header into b.
func PutHeader(b []byte, op, flags uint16, arg uint32) {
	LE.PutUint16(b[0:], op)
	LE.PutUint16(b[2:], flags)
	LE.PutUint32(b[4:], arg)
}

// AppendHeader appends a header to b.
func AppendHeader(b []byte, op, flags uint16, arg uint32) []byte {
	b = LE.AppendUint16(b, op)
	b = LE.AppendUint16(b, flags)
	return LE.AppendUint32(b, arg)
}

// Header is a message's header.
type Header struct {
	Op    uint16
	Flags uint16
	Arg   uint32
}

// ParseHeader reads the header of b; false when b is too short for one.
func ParseHeader(b []byte) (Header, bool) {
	if len(b) < HeaderSize {
		return Header{}, false
	}
	return Header{LE.Uint16(b[0:]), LE.Uint16(b[2:]), LE.Uint32(b[4:])}, true
}

// AppendResult appends a Result reply: ret, and for an error its errno
// (negated) and text.
func AppendResult(b []byte, ret int64, err error) []byte {
	b = AppendHeader(b, OpResult, 0, 0)
	if err != nil {
		b = LE.AppendUint64(b, uint64(-int64(ErrnoOf(err))))
		msg := errorText(err)
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		return append(b, msg...)
	}
	return LE.AppendUint64(b, uint64(ret))
}

// errorText is what a client is told of an error: for a command eventdef
// rejected, the field and the rule ("field 1 \"u32 a \": ..."), which is
// what the caller needs; otherwise the error's own text.
func errorText(err error) string {
	if pe, ok := errors.AsType[*eventdef.Error](err); ok {
		return pe.Detail()
	}
	if pathErr, ok := errors.AsType[*fs.PathError](err); ok {
		return pathErr.Err.Error()
	}
	return err.Error()
}

// ErrnoOf is the errno an error stands for: EIO when it wraps none.
func ErrnoOf(err error) unix.Errno {
	if e, ok := errors.AsType[unix.Errno](err); ok && e != 0 {
		return e
	}
	return unix.EIO
}

// RemoteError is an error the daemon returned: its errno and its text.
// errors.Is(err, unix.EINVAL) works on it as on a kernel errno.
type RemoteError struct {
	Errno unix.Errno
	Text  string // the daemon's description, e.g. "register \"x\": ..."
}

func (e *RemoteError) Error() string { return e.Text }

// Unwrap returns the errno.
func (e *RemoteError) Unwrap() error { return e.Errno }

// ParseResult reads a Result reply: ret on success, a *RemoteError when ret
// is a negated errno.
func ParseResult(b []byte) (int64, []byte, error) {
	h, ok := ParseHeader(b)
	if !ok || h.Op != OpResult || len(b) < HeaderSize+8 {
		return 0, nil, ErrProtocol
	}
	ret := int64(LE.Uint64(b[HeaderSize:]))
	rest := b[HeaderSize+8:]
	if ret < 0 && ret >= -4095 {
		e := unix.Errno(-ret)
		text := string(rest)
		if text == "" {
			text = e.Error()
		}
		return ret, nil, &RemoteError{Errno: e, Text: text}
	}
	return ret, rest, nil
}

// ErrProtocol is a message that breaks the protocol.
var ErrProtocol = errors.New("uetrace daemon: malformed reply")

// DefaultSocket is where the daemon listens and clients dial when no path
// is given: $UETRACE_SOCKET, else /run/uetrace/uetrace.sock for root, else
// $XDG_RUNTIME_DIR/uetrace/uetrace.sock, else /tmp/uetrace-<uid>/uetrace.sock.
func DefaultSocket() string {
	if p := os.Getenv("UETRACE_SOCKET"); p != "" {
		return p
	}
	if os.Geteuid() == 0 {
		return "/run/uetrace/uetrace.sock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "uetrace", "uetrace.sock")
	}
	return filepath.Join(os.TempDir(), "uetrace-"+strconv.Itoa(os.Geteuid()), "uetrace.sock")
}

// UserName is how both ends name a uid in what they tell users: its name
// in /etc/passwd, else the number. The file is read here rather than
// through os/user, which would make every program linking the client a cgo
// program; a name only a directory service knows shows as its number.
func UserName(uid uint32) string { return nameOf("/etc/passwd", uid) }

// GroupName is UserName for a gid, from /etc/group.
func GroupName(gid uint32) string { return nameOf("/etc/group", gid) }

// UserID is the uid /etc/passwd gives name.
func UserID(name string) (uint32, bool) {
	for f := range entries("/etc/passwd") {
		if f[0] == name {
			if n, err := strconv.ParseUint(f[2], 10, 32); err == nil {
				return uint32(n), true
			}
		}
	}
	return 0, false
}

// nameOf is the name of id in a passwd-format file, else the number.
func nameOf(file string, id uint32) string {
	want := strconv.FormatUint(uint64(id), 10)
	for f := range entries(file) {
		if f[2] == want && f[0] != "" {
			return f[0]
		}
	}
	return want
}

// entries are the lines of a passwd-format file ("name:password:id:…"),
// split at their first three colons; lines with fewer fields are skipped.
func entries(file string) iter.Seq[[]string] {
	return func(yield func([]string) bool) {
		b, err := procfs.ReadFile(file)
		if err != nil {
			return
		}
		for line := range strings.Lines(string(b)) {
			f := strings.SplitN(strings.TrimRight(line, "\n"), ":", 4)
			if len(f) >= 3 && !yield(f) {
				return
			}
		}
	}
}

// Rights returns the descriptors that control data (SCM_RIGHTS) carries.
func Rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}
