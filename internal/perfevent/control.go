package perfevent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The files through which uetrace run (package runguard) and the tree
// (package fusefs) make perf events: hidden names of the tree's root,
// listed nowhere.
//
// Dir/ControlFile takes one Request per write(2) and answers it on the next
// read(2) (Reply). Dir/<id> is the file of event id, which perf_event_open
// hands to its caller: its mmap is the event's ring (FUSE passthrough to
// the memfd), its read, ioctls and poll are perf's.
const (
	Dir         = ".uetrace-perf"
	ControlFile = "ctl"
)

// Path is the path of event id's file under the tree's root.
func Path(id uint64) string { return Dir + "/" + strconv.FormatUint(id, 10) }

// IDOfPath returns the event id of a path of the tree — as the tree names
// it, or as a descriptor's /proc link shows it in any mount namespace (it
// ends in Dir/<id>) — and whether it is one.
func IDOfPath(p string) (uint64, bool) {
	i := strings.LastIndex(p, Dir+"/")
	if i < 0 || (i > 0 && p[i-1] != '/') {
		return 0, false
	}
	id, err := strconv.ParseUint(p[i+len(Dir)+1:], 10, 64)
	return id, err == nil
}

// Operations of a Request.
const (
	OpOpen = 1 // perf_event_open: make an event
	OpMmap = 2 // mmap of an event's file: size its ring
	OpExec = 3 // a task execs: enable its enable_on_exec events
)

// Request is what uetrace run asks the tree.
type Request struct {
	Op uint32
	// OpOpen: the call's arguments (pid, cpu, flags; group_fd is -1), the
	// caller's thread in the tree's pid namespace, and the attr as the
	// caller's memory has it (attr.size bytes).
	PID, CPU, Flags int32
	Caller          uint32
	Attr            []byte
	// OpMmap: the event, and the mapping's length, offset and protection.
	Event  uint64
	Length uint64
	Offset int64
	Prot   uint32
	// OpExec: the thread that execs (Caller).
}

// maxRequest bounds a request: the header and the largest attr.
const maxRequest = 32 + MaxAttrSize

// Encode lays r out for write(2).
func (r *Request) Encode() []byte {
	b := ne.AppendUint32(nil, r.Op)
	switch r.Op {
	case OpOpen:
		b = ne.AppendUint32(b, uint32(r.PID))
		b = ne.AppendUint32(b, uint32(r.CPU))
		b = ne.AppendUint32(b, uint32(r.Flags))
		b = ne.AppendUint32(b, r.Caller)
		b = ne.AppendUint32(b, uint32(len(r.Attr)))
		b = append(b, r.Attr...)
	case OpMmap:
		b = ne.AppendUint64(b, r.Event)
		b = ne.AppendUint64(b, r.Length)
		b = ne.AppendUint64(b, uint64(r.Offset))
		b = ne.AppendUint32(b, r.Prot)
	case OpExec:
		b = ne.AppendUint32(b, r.Caller)
	}
	return b
}

var errRequest = errors.New("malformed perf event request")

// DecodeRequest reads a request a write(2) carried; anything malformed is
// EINVAL. The attr aliases b.
func DecodeRequest(b []byte) (Request, error) {
	var r Request
	bad := func(why string) (Request, error) {
		return Request{}, fmt.Errorf("%w: %s: %w", errRequest, why, unix.EINVAL)
	}
	if len(b) < 4 || len(b) > maxRequest {
		return bad(fmt.Sprintf("%d bytes", len(b)))
	}
	r.Op = ne.Uint32(b)
	b = b[4:]
	switch r.Op {
	case OpOpen:
		if len(b) < 20 {
			return bad("short open")
		}
		r.PID = int32(ne.Uint32(b))
		r.CPU = int32(ne.Uint32(b[4:]))
		r.Flags = int32(ne.Uint32(b[8:]))
		r.Caller = ne.Uint32(b[12:])
		n := ne.Uint32(b[16:])
		if uint64(n) != uint64(len(b)-20) {
			return bad("attr length")
		}
		r.Attr = b[20:]
	case OpMmap:
		if len(b) != 28 {
			return bad("mmap length")
		}
		r.Event = ne.Uint64(b)
		r.Length = ne.Uint64(b[8:])
		r.Offset = int64(ne.Uint64(b[16:]))
		r.Prot = ne.Uint32(b[24:])
	case OpExec:
		if len(b) != 4 {
			return bad("exec length")
		}
		r.Caller = ne.Uint32(b)
	default:
		return bad(fmt.Sprintf("operation %d", r.Op))
	}
	return r, nil
}

// Reply is the tree's answer: a value (an event's id for OpOpen) or an
// errno with the words that say why.
type Reply struct {
	Value uint64
	Errno unix.Errno
	Why   string
}

// maxWhy bounds the words of a reply.
const maxWhy = 1024

// ReplyOf answers with err's errno and words, or value when err is nil.
func ReplyOf(value uint64, err error) Reply {
	if err == nil {
		return Reply{Value: value}
	}
	var e unix.Errno
	if !errors.As(err, &e) {
		e = unix.EIO
	}
	return Reply{Errno: e, Why: err.Error()}
}

// Encode lays r out for read(2).
func (r *Reply) Encode() []byte {
	b := ne.AppendUint64(nil, r.Value)
	b = ne.AppendUint32(b, uint32(r.Errno))
	why := r.Why
	if len(why) > maxWhy {
		why = why[:maxWhy]
	}
	return append(b, why...)
}

// DecodeReply reads a reply.
func DecodeReply(b []byte) (Reply, error) {
	if len(b) < 12 || len(b) > 12+maxWhy {
		return Reply{}, fmt.Errorf("malformed perf event reply of %d bytes: %w", len(b), unix.EIO)
	}
	return Reply{Value: ne.Uint64(b), Errno: unix.Errno(ne.Uint32(b[8:])), Why: string(b[12:])}, nil
}

// Err is the reply's error, nil for a value.
func (r *Reply) Err() error {
	if r.Errno == 0 {
		return nil
	}
	return &ReplyError{Errno: r.Errno, Why: r.Why}
}

// ReplyError is an errno the tree answered, with its words.
type ReplyError struct {
	Errno unix.Errno
	Why   string
}

func (e *ReplyError) Error() string { return e.Why }
func (e *ReplyError) Unwrap() error { return e.Errno }
