// Package usereventstest is user_events inside the test's own process — a
// kernel for tests and demos, as net/http/httptest is a server: a Go
// program's events registered and written through package userevents,
// enabled and read back through package tracefs, with no root, no daemon
// and no kernel support. It is uetrace's subsystem, Linux 6.12's
// user_events in Go, byte for byte in what it answers: the same errno,
// the same format files and trace text.
//
//	k := usereventstest.NewKernel(nil)
//	f, err := userevents.Open(k.Options())
//	...
//	err = k.Tracefs().WriteFile("events/user_events/myapp_request/enable", []byte("1"), os.O_TRUNC)
//
// Writes are synchronous: a record is in the trace buffer when Write
// returns. Enable bits are set in the process's own memory, as the kernel
// sets them.
package usereventstest

import (
	"bytes"
	"context"

	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// Options configure a Kernel. A nil *Options is one CPU and the kernel's
// default buffer.
type Options struct {
	// NumCPU is how many per-CPU buffers the trace buffer has (0: 1): a
	// record goes to the buffer of the CPU its writer ran on, modulo
	// NumCPU.
	NumCPU int
	// BufferKB is each CPU's buffer_size_kb (0: Linux's unexpanded
	// boot-time buffer, which grows to 1408 KiB when the first event is
	// enabled).
	BufferKB int
}

// Kernel is user_events in this process.
type Kernel struct{ k *inproc.Kernel }

// NewKernel makes a Kernel with no events.
func NewKernel(opts *Options) *Kernel {
	var o subsys.Options
	if opts != nil {
		o.NumCPU, o.BufferKB = opts.NumCPU, opts.BufferKB
	}
	return &Kernel{inproc.New(subsys.New(o))}
}

// Options are the userevents.Options that open this kernel's
// user_events_data.
func (k *Kernel) Options() *userevents.Options { return k.k.Options() }

// OpenData opens one user_events_data of this kernel: Options.OpenData.
func (k *Kernel) OpenData() (userevents.DataFile, error) { return k.k.OpenData() }

// Tracefs is this kernel's tracefs tree: enable files, trace, trace_pipe,
// user_events_status and the rest.
func (k *Kernel) Tracefs() *tracefs.Tracefs { return k.k.Tracefs() }

// Session is a perf-like session on a Kernel: the records of the events it
// is attached to, as perf_event_open of their tracepoints with
// PERF_SAMPLE_RAW hands them to perf — for a test that decodes what its
// program wrote (an EventHeader event with eventheader.Decode, say). While
// it is attached, its events are enabled.
type Session struct {
	ss  *subsys.Session
	buf []byte
}

// NewSession attaches a session to the events pattern names, as
// "system:event" with the glob characters of path.Match
// ("user_events:myapp_*"), and to those that match it later.
func (k *Kernel) NewSession(pattern string) (*Session, error) {
	ss := k.k.Subsystem().NewSession(subsys.SessionOptions{})
	if _, err := ss.AttachMatching(pattern, true); err != nil {
		ss.Close()
		return nil, err
	}
	return &Session{ss: ss}, nil
}

// Record is one record a Session read.
type Record struct {
	Time     uint64 // CLOCK_MONOTONIC, ns
	PID, TID int32  // the writer's process and thread
	CPU      int32
	System   string // the event's system: user_events, user_events_multi
	Name     string // its tracepoint: the name, "name.<hexid>" for a multi-format event
	// Raw is the record as perf's raw data carries it: the 8-byte common
	// header (type id, flags, preempt count, pid), the payload, and zeros
	// up to perf's 8-byte alignment of the raw size field and data.
	Raw []byte
}

// Payload is what the writer wrote after the write index: Raw without the
// common header. It may end with perf's alignment zeros.
func (r Record) Payload() []byte { return r.Raw[min(8, len(r.Raw)):] }

// Records returns the records written since the last call. Writes are
// synchronous: what a Write returned before is there.
func (s *Session) Records() []Record {
	if s.buf == nil {
		s.buf = make([]byte, 1<<20)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var out []Record
	for {
		recs, err := s.ss.Read(done, s.buf, nil)
		for _, r := range recs {
			out = append(out, Record{Time: r.TS, PID: r.PID, TID: r.TID, CPU: r.CPU,
				System: r.Event.System(), Name: r.Event.Tracepoint(), Raw: bytes.Clone(r.Raw)})
		}
		if err != nil || len(recs) == 0 {
			return out
		}
	}
}

// Lost is how many records the session had no room for.
func (s *Session) Lost() uint64 { return s.ss.Lost() }

// Close detaches the session.
func (s *Session) Close() error { return s.ss.Close() }
