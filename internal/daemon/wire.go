package daemon

import (
	"encoding/binary"
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
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
//	WriteHead   a write longer than MaxWrite (opWriteHead): arg and flags
//	            as Write. Body: u32 the write's length, then its first
//	            MaxWrite-4 bytes. Answered as the whole write, which no
//	            consumer can take (subsys.File.WriteHead). A daemon before
//	            WriteHead answers EPROTO.
//	WriteFile   arg: handle. Body: the bytes to write.
//	CloseFile   arg: handle.
//	ReadDir     arg: the index of the first entry wanted. Body: a path.
//	            Reply: Data holding the entries from there that fit in a
//	            message, each u32 mode followed by the name and a NUL; none
//	            once past the last. The client asks again from the index
//	            after the last it got, as getdents goes on from its offset,
//	            so no listing is too large. A listing that fails part way
//	            (subsys.FS.ReadDir) answers its error past its entries.
//	Session     flags: 1 = count as "other" rather than perf. Body: u32
//	            buffer bytes. Reply: Result with the handle.
//	Attach      arg: session handle; flags: 1 = follow events created later.
//	            Body: a pattern (subsys.MatchEvent). Reply: Data with the
//	            attached events' "system:tracepoint" names, NUL-terminated.
//	Ring        no body; SCM_RIGHTS carries a ring memfd (internal/shmring)
//	            that the client publishes its writes into without a system
//	            call, each record [write_index][payload] with the thread,
//	            CPU and CLOCK_MONOTONIC time, and the eventfd the client
//	            adds 1 to when it publishes while the daemon sleeps. A
//	            record of write index LostIndex counts records the client
//	            dropped, its ring full. At most one per connection;
//	            the daemon drains it into this connection's user_events_data
//	            (the write index is this connection's; the pid is the
//	            peer's), and before each Read and SessionRead delivers what
//	            every ring holds. Reply: Result. A daemon before Ring
//	            answers EPROTO ("unknown request"), and the client writes
//	            with Write instead: the protocol version is unchanged.
//	SessionRead arg: session handle; flags: 1 = do not wait. Body: u32
//	            maximum bytes. Blocks until a record is there, unless told
//	            not to wait (then the reply may hold none). Reply: Data: u64 lost, u64 too large, then
//	            records of u64 time, i32 pid, i32 tid, i32 cpu, u32 type id,
//	            u32 length and the raw record padded to 8 bytes.
//	RingFlush   no body: deliver what the connection's ring holds. Reply:
//	            Result once it is delivered.
//	SetFilter   arg: session handle. Body: "system:tracepoint", a NUL, and
//	            the filter text: the session's filter for that event, as
//	            PERF_EVENT_IOC_SET_FILTER (subsys.Session.SetFilter).
//	            Reply: Result. A daemon before SetFilter answers EPROTO.
//	SessionRing, SessionSync
//	            a session's records through a shared-memory ring the
//	            daemon creates and sends (SCM_RIGHTS): see session_ring.go.
//	Stats       no body: the daemon's counts (limits.go). Reply: Data,
//	            "name value" lines.
//
// Replies (daemon → client):
//
//	Result  body: i64 ret — the errno negated on failure — and on failure the
//	        error text. Register's adds u32 write_index.
//	Data    body: the bytes read.
//	HelloOK body: u32 version, u32 pid as the daemon sees it, u32 flags
//	        (1 = the daemon counts the caller as perfmon_capable, 2 = as a
//	        tracer: it may control tracing and read others' records).
const (
	opHello uint16 = 1 + iota
	opRegister
	opUnregister
	opDelete
	opWrite
	opOpen
	opRead
	opWriteFile
	opCloseFile
	opReadDir
	opSession
	opAttach
	opSessionRead
	opRing
	opRingFlush
)

// opSetFilter is numbered apart from the others, as the session ring's
// ops are (session_ring.go).
const opSetFilter uint16 = 64

// opWriteHead carries the head of a write longer than a message holds
// (WriteHead above); numbered apart, as opSetFilter.
const opWriteHead uint16 = 72

// Reply ops have the top bit set.
const (
	opResult uint16 = 0x8000 + iota
	opData
	opHelloOK
)

// Version is the protocol version this package speaks.
const Version = 1

// helloMagic opens every Hello.
const helloMagic = "UETRACE\x00"

const (
	headerSize = 8
	helloSize  = headerSize + 8 + 4 + 4 + 8 + 8

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
	MaxWrite = MaxMessage - headerSize
)

const (
	flagNameFault   = 1 // Register: name_args unreadable
	flagOther       = 1 // Session: an "other" consumer
	flagComm        = 2 // Session: records of the writers' names
	flagFollow      = 1 // Attach: follow new events
	flagNoWait      = 1 // SessionRead: answer at once, with no records if none wait
	helloPerfmon    = 1 // HelloOK: caller is perfmon_capable
	helloTracer     = 2 // HelloOK: caller is a tracer (policy.go)
	recordHeaderLen = 8 + 4 + 4 + 4 + 4 + 4
)

var le = binary.LittleEndian

func putHeader(b []byte, op, flags uint16, arg uint32) {
	le.PutUint16(b[0:], op)
	le.PutUint16(b[2:], flags)
	le.PutUint32(b[4:], arg)
}

func appendHeader(b []byte, op, flags uint16, arg uint32) []byte {
	b = le.AppendUint16(b, op)
	b = le.AppendUint16(b, flags)
	return le.AppendUint32(b, arg)
}

type header struct {
	op    uint16
	flags uint16
	arg   uint32
}

func parseHeader(b []byte) (header, bool) {
	if len(b) < headerSize {
		return header{}, false
	}
	return header{le.Uint16(b[0:]), le.Uint16(b[2:]), le.Uint32(b[4:])}, true
}

// appendResult appends a Result reply: ret, and for an error its errno
// (negated) and text.
func appendResult(b []byte, ret int64, err error) []byte {
	b = appendHeader(b, opResult, 0, 0)
	if err != nil {
		b = le.AppendUint64(b, uint64(-int64(errnoOf(err))))
		msg := errorText(err)
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		return append(b, msg...)
	}
	return le.AppendUint64(b, uint64(ret))
}

// errorText is what a client is told of an error: for a command eventdef
// rejected, the field and the rule ("field 1 \"u32 a \": ..."), which is
// what the caller needs; otherwise the error's own text.
func errorText(err error) string {
	var pe *eventdef.Error
	if errors.As(err, &pe) {
		return pe.Detail()
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err.Error()
	}
	return err.Error()
}

// errnoOf is the errno an error stands for: EIO when it wraps none.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) && e != 0 {
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
func (e *RemoteError) Unwrap() error { return e.Errno }

// parseResult reads a Result reply: ret on success, a *RemoteError when ret
// is a negated errno.
func parseResult(b []byte) (int64, []byte, error) {
	h, ok := parseHeader(b)
	if !ok || h.op != opResult || len(b) < headerSize+8 {
		return 0, nil, errProtocol
	}
	ret := int64(le.Uint64(b[headerSize:]))
	rest := b[headerSize+8:]
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

var errProtocol = errors.New("uetrace daemon: malformed reply")
