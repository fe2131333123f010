package subsys

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// relLocPayload is the payload of "l __rel_loc char[] s" (or, with n, of
// "l u32 n; __rel_loc char[] s") whose string is size bytes of c, the last
// one NUL when nul.
func relLocPayload(n *uint32, size int, c byte, nul bool) []byte {
	var p []byte
	if n != nil {
		p = binary.NativeEndian.AppendUint32(p, *n)
	}
	p = binary.NativeEndian.AppendUint32(p, uint32(size)<<16)
	s := bytes.Repeat([]byte{c}, size)
	if nul {
		s[size-1] = 0
	}
	return append(p, s...)
}

// TestWriteLargeRecords follows Linux 6.12's user_events_write_core and its
// probes: each consumer reserves room for the record before it validates
// it, so a record no consumer can take is dropped unvalidated and the
// write succeeds — ftrace's page holds a record of at most 4072 bytes
// (payload 4064), perf_trace_buf_alloc ALIGN(record, 8) ≤ 8192 (payload
// 8184), a filtered event's trace_buffered_event 4088 (payload 4080) —
// and a record a consumer took and found invalid is EFAULT. The answers
// are the kernel's, from the VM (conformance/scenarios/write-large-*.scn).
func TestWriteLargeRecords(t *testing.T) {
	one, two := uint32(1), uint32(2)
	type write struct {
		n    *uint32 // the u32 field before the string, for the filtered event
		size int     // the string's bytes
		nul  bool    // whether its last byte is NUL (valid)
		want error   // nil: the write succeeds
	}
	tests := []struct {
		name       string
		ftrace     bool
		filter     string // the event's ftrace filter ("n" field)
		tracingOff bool
		session    bool
		writes     []write
		// what reached the consumers: the sizes of the strings in the
		// trace and in the session, and the records the event counts
		// as dropped and the session as too large.
		trace, samples    []int
		dropped, tooLarge uint64
	}{
		{name: "ftrace", ftrace: true, writes: []write{
			{size: 4060, want: unix.EFAULT},
			{size: 4061}, {size: 4100}, {size: 5000}, {size: 60000},
			{size: 4061, nul: true},
			{size: 4060, nul: true},
			{size: 3, nul: true},
		}, trace: []int{4060, 3}, dropped: 5},
		{name: "perf", session: true, writes: []write{
			{size: 4100, want: unix.EFAULT},
			{size: 5000, want: unix.EFAULT},
			{size: 8180, want: unix.EFAULT},
			{size: 8181}, {size: 60000},
			{size: 8181, nul: true},
			{size: 8180, nul: true},
			{size: 3, nul: true},
		}, samples: []int{8180, 3}, dropped: 3, tooLarge: 3},
		{name: "both", ftrace: true, session: true, writes: []write{
			{size: 4060, want: unix.EFAULT},
			{size: 4061, want: unix.EFAULT},
			{size: 5000, want: unix.EFAULT},
			{size: 8180, want: unix.EFAULT},
			{size: 8181}, {size: 60000},
			{size: 20, nul: true},
			{size: 4100, nul: true},
			{size: 8181, nul: true},
		}, trace: []int{20}, samples: []int{20, 4100}, dropped: 2 + 2 + 1 + 2, tooLarge: 3},
		{name: "ftrace filtered", ftrace: true, filter: "n == 1", writes: []write{
			{n: &one, size: 4056, want: unix.EFAULT},
			{n: &one, size: 4057, want: unix.EFAULT},
			{n: &one, size: 4072, want: unix.EFAULT},
			{n: &one, size: 4073}, {n: &one, size: 5000},
			{n: &two, size: 4072, want: unix.EFAULT},
			{n: &one, size: 4057, nul: true},
			{n: &one, size: 3, nul: true},
			{n: &two, size: 3, nul: true},
		}, trace: []int{3}, dropped: 3},
		{name: "tracing off", ftrace: true, tracingOff: true, writes: []write{
			{n: &one, size: 3}, {n: &one, size: 3, nul: true}, {n: &one, size: 5000},
		}},
		{name: "tracing off, filtered", ftrace: true, tracingOff: true, filter: "n == 1", writes: []write{
			{n: &one, size: 3, want: unix.EFAULT}, {n: &one, size: 3, nul: true}, {n: &one, size: 5000},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			f := e.s.Open()
			cmd := "l __rel_loc char[] s"
			if tt.writes[0].n != nil {
				cmd = "l u32 n; __rel_loc char[] s"
			}
			idx, err := e.reg(f, cmd, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.filter != "" {
				if err := e.write("events/user_events/l/filter", tt.filter); err != nil {
					t.Fatal(err)
				}
			}
			if tt.ftrace {
				e.enable("l", true)
			}
			if tt.tracingOff {
				if err := e.write("tracing_on", "0"); err != nil {
					t.Fatal(err)
				}
			}
			var ss *Session
			if tt.session {
				ss = e.s.NewSession(SessionOptions{BufferBytes: 1 << 20})
				defer ss.Close()
				if err := ss.Attach(e.s.Lookup("user_events", "l")); err != nil {
					t.Fatal(err)
				}
			}
			w := Writer{PID: 1, TGID: 1, Comm: "w", CPU: 0}
			for i, wr := range tt.writes {
				p := relLocPayload(wr.n, wr.size, 'a'+byte(i), wr.nul)
				got, err := f.Writev(w, le32(idx), p)
				if wr.want == nil && (err != nil || got != 4+len(p)) {
					t.Errorf("write %d (%d bytes, NUL %v) = %d, %v; want %d", i, wr.size, wr.nul, got, err, 4+len(p))
				}
				if wr.want != nil && !errors.Is(err, wr.want) {
					t.Errorf("write %d (%d bytes, NUL %v) = %d, %v; want %v", i, wr.size, wr.nul, got, err, wr.want)
				}
			}
			if tt.tracingOff {
				if err := e.write("tracing_on", "1"); err != nil {
					t.Fatal(err)
				}
			}
			var trace []int
			for _, l := range lines(e.read("trace")) {
				if _, s, ok := strings.Cut(l, " s="); ok && !strings.HasPrefix(l, "#") {
					trace = append(trace, len(s)+1)
				}
			}
			if fmt.Sprint(trace) != fmt.Sprint(tt.trace) {
				t.Errorf("the trace has strings of %v bytes, want %v", trace, tt.trace)
			}
			var samples []int
			if ss != nil {
				recs, err := ss.Read(context.Background(), make([]byte, 1<<20), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					samples = append(samples, int(binary.NativeEndian.Uint32(r.Raw[8:])>>16))
				}
				if ss.TooLarge() != tt.tooLarge {
					t.Errorf("the session's TooLarge is %d, want %d", ss.TooLarge(), tt.tooLarge)
				}
			}
			if fmt.Sprint(samples) != fmt.Sprint(tt.samples) {
				t.Errorf("the session has strings of %v bytes, want %v", samples, tt.samples)
			}
			if _, dropped := e.s.Lookup("user_events", "l").Counts(); dropped != tt.dropped {
				t.Errorf("the event counts %d dropped, want %d", dropped, tt.dropped)
			}
		})
	}
}

// TestWriteHead: a write of which only the head came is answered as the
// whole write when no consumer can take a record that long, and is
// EMSGSIZE, changing nothing, when one could.
func TestWriteHead(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	idx, err := e.reg(f, "l __rel_loc char[] s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := Writer{PID: 1, TGID: 1, Comm: "w"}
	head := append(le32(idx), relLocPayload(nil, 100, 'a', false)[:50]...)
	if _, err := f.WriteHead(w, head, 70000); !errors.Is(err, unix.EBADF) {
		t.Errorf("disabled: %v, want EBADF", err)
	}
	if _, err := f.WriteHead(w, head[:3], 70000); !errors.Is(err, unix.EINVAL) {
		t.Errorf("no index: %v, want EINVAL", err)
	}
	e.enable("l", true)
	if n, err := f.WriteHead(w, head, 70000); err != nil || n != 70000 {
		t.Errorf("70000 bytes: %d, %v", n, err)
	}
	if _, err := f.WriteHead(w, head, 4000); !errors.Is(err, unix.EMSGSIZE) {
		t.Errorf("4000 bytes, which the trace buffer takes: %v, want EMSGSIZE", err)
	}
	if n, err := f.WriteHead(w, append(le32(idx), relLocPayload(nil, 3, 'a', true)...), 11); err != nil || n != 11 {
		t.Errorf("a whole write: %d, %v", n, err)
	}
	if written, dropped := e.s.Lookup("user_events", "l").Counts(); written != 2 || dropped != 1 {
		t.Errorf("written %d, dropped %d; want 2 and 1", written, dropped)
	}
}
