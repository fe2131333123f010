package subsys

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys/ftrace"
)

// TestTracePipeRawIsTheKernels replays, through the tree, the scenarios
// of internal/subsys/ftrace/testdata/kernel-ftrace.json (Linux 6.12.117's
// ring buffer, kernel/cmd/ftracegolden) that are only writes and reads of
// per_cpu/cpu0/trace_pipe_raw — thousands of records of 1 to 4065 bytes in
// buffers of 4, 8 and 12 KiB, which overwrite — and compares every page
// read from the tree's trace_pipe_raw with the kernel's, byte for byte:
// the same writes by the same threads, at the times the kernel's pages
// show, to events of the same type ids. Masked, as ftrace's golden test
// masks them: the up to 3 bytes rounding a record up, which the kernel
// leaves as the page held them before, and the need-resched flags of
// common_flags, which the kernel sets when a tick asked for a reschedule.
func TestTracePipeRawIsTheKernels(t *testing.T) {
	b, err := os.ReadFile("ftrace/testdata/kernel-ftrace.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Comm   string `json:"comm"`
		Events []struct {
			Cmd  string `json:"cmd"`
			Name string `json:"name"`
			ID   int    `json:"id"`
		} `json:"events"`
		Scenarios []struct {
			Name  string `json:"name"`
			Steps []struct {
				Op    string   `json:"op"`
				Arg   string   `json:"arg"`
				Event string   `json:"event"`
				CPU   *int     `json:"cpu"`
				Size  int      `json:"size"`
				Seq   uint32   `json:"seq"`
				Count int      `json:"count"`
				TID   int32    `json:"tid"`
				Pages []string `json:"pages"`
			} `json:"steps"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	cmds := map[string]string{}
	for _, e := range g.Events {
		ids[e.Name], cmds[e.Name] = e.ID, e.Cmd
	}
	pages, scenarios := 0, 0
	for _, sc := range g.Scenarios {
		// Only writes on CPU 0, then its raw pages.
		var writes []int
		var raw []string
		simple := true
		for i, s := range sc.Steps {
			switch s.Op {
			case "trunc", "buffer_size_kb", "read", "trace", "stats":
			case "write":
				simple = simple && s.CPU != nil && *s.CPU == 0 && s.Size > 0
				writes = append(writes, i)
			case "raw":
				simple = simple && s.CPU != nil && *s.CPU == 0
				raw = append(raw, s.Pages...)
			default:
				simple = false
			}
		}
		if !simple || len(writes) != 1 || len(raw) == 0 {
			continue
		}
		w := sc.Steps[writes[0]]
		var kb string
		for _, s := range sc.Steps {
			if s.Op == "buffer_size_kb" {
				kb = s.Arg
			}
		}
		// The records in the kernel's pages are the last writes, at the
		// times the pages say.
		times := pageTimes(t, raw)
		if len(times) > w.Count {
			t.Fatalf("%s: %d records in the pages of %d writes", sc.Name, len(times), w.Count)
		}
		var now uint64
		s := New(Options{NumCPU: 2, FirstID: ids[w.Event], LastID: ids[w.Event], Clock: func() uint64 { return now }})
		tree := s.FS()
		if err := tree.WriteFile(FileDynamicEvents, []byte("u:"+cmds[w.Event]), os.O_APPEND, root); err != nil {
			t.Fatal(err)
		}
		f := s.Open()
		idx, err := f.Register(s.NewProcess(newMem()), root, regArgs(cmds[w.Event], check, 31, 4, 0))
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []struct{ path, text string }{
			{"events/user_events/" + w.Event + "/enable", "1"}, {FileBufferSizeKB, kb}, {FileTrace, ""},
		} {
			if err := tree.WriteFile(op.path, []byte(op.text), os.O_TRUNC, root); err != nil {
				t.Fatalf("%s: %s: %v", sc.Name, op.path, err)
			}
		}
		first := w.Count - len(times)
		for i := range w.Count {
			if i < first {
				now = times[0] - uint64(first-i)*1000 // overwritten: only their order counts
			} else {
				now = times[i-first]
			}
			rec := binary.NativeEndian.AppendUint32(nil, idx)
			rec = append(rec, goldenPayload(w.Size, w.Seq+uint32(i))...)
			if _, err := f.Write(Writer{PID: w.TID, TGID: w.TID, Comm: g.Comm, CPU: 0}, rec, 0); err != nil {
				t.Fatalf("%s: write %d: %v", sc.Name, i, err)
			}
		}
		f.Close()
		h, err := tree.Open("per_cpu/cpu0/trace_pipe_raw", os.O_RDONLY|unix.O_NONBLOCK, root)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for {
			page := make([]byte, ftrace.PageSize)
			n, err := h.ReadContext(context.Background(), page)
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil || n != ftrace.PageSize {
				t.Fatalf("%s: read %d: %v", sc.Name, n, err)
			}
			got = append(got, page)
		}
		h.Close()
		if len(got) != len(raw) {
			t.Errorf("%s: %d pages, the kernel's %d", sc.Name, len(got), len(raw))
		}
		for i := range min(len(got), len(raw)) {
			kernel, _ := base64.StdEncoding.DecodeString(raw[i])
			kernel = append(kernel, make([]byte, ftrace.PageSize-len(kernel))...)
			events := rbEvents(t, kernel)
			mask(kernel, events, w.Size)
			mask(got[i], events, w.Size)
			if !slices.Equal(got[i], kernel) {
				t.Errorf("%s: page %d differs from the kernel's:\n ours   %s\n kernel %s", sc.Name, i, hexDiff(got[i], kernel), hexDiff(kernel, got[i]))
			}
		}
		pages += len(got)
		scenarios++
	}
	if pages < 60 {
		t.Fatalf("compared %d pages of %d scenarios: the golden file has more", pages, scenarios)
	}
	t.Logf("%d pages of %d scenarios are the kernel's", pages, scenarios)
}

// goldenPayload is ftracegolden's payload generator: size n and sequence
// number s give the u32 s, then bytes byte(s+i).
func goldenPayload(size int, seq uint32) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(seq + uint32(i))
	}
	if size >= 4 {
		binary.NativeEndian.PutUint32(b, seq)
	}
	return b
}

// rbEvent is one event of a raw page: where it starts, its header's
// type_len, and for data its record's offset and length (the rounded one
// the header gives).
type rbEvent struct {
	off, typeLen, rec, recLen int
	delta                     uint64
}

// rbEvents parses the events of a raw page (the kernel's ring buffer
// event layout, as header_event describes it).
func rbEvents(t *testing.T, page []byte) []rbEvent {
	commit := int(binary.LittleEndian.Uint64(page[8:]) & (1<<30 - 1))
	data := page[ftrace.PageHeaderSize:]
	var out []rbEvent
	for off := 0; off < commit; {
		w := binary.LittleEndian.Uint32(data[off:])
		e := rbEvent{off: off, typeLen: int(w & 31), delta: uint64(w >> 5)}
		switch {
		case e.typeLen == 29: // padding
			if e.delta == 0 {
				return out
			}
			off += 4 + int(binary.LittleEndian.Uint32(data[off+4:]))
		case e.typeLen == 30 || e.typeLen == 31: // time extend, time stamp
			e.delta |= uint64(binary.LittleEndian.Uint32(data[off+4:])) << 27
			off += 8
		case e.typeLen == 0:
			e.recLen = int(binary.LittleEndian.Uint32(data[off+4:])) - 4
			e.rec = ftrace.PageHeaderSize + off + 8
			off += 8 + e.recLen
		default:
			e.recLen = 4 * e.typeLen
			e.rec = ftrace.PageHeaderSize + off + 4
			off += 4 + e.recLen
		}
		if off > commit {
			t.Fatalf("a raw page's event at %d runs past its commit %d", e.off, commit)
		}
		out = append(out, e)
	}
	return out
}

// pageTimes returns the time stamp of each record in the pages, in order.
func pageTimes(t *testing.T, pages []string) (times []uint64) {
	for _, p := range pages {
		page, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			t.Fatal(err)
		}
		page = append(page, make([]byte, ftrace.PageSize-len(page))...)
		ts := binary.LittleEndian.Uint64(page)
		for _, e := range rbEvents(t, page) {
			ts += e.delta
			if e.rec != 0 {
				times = append(times, ts)
			}
		}
	}
	return times
}

// mask clears in page what says nothing of a record of size payload
// bytes, at each of events: the need-resched bits of its common_flags
// (TRACE_FLAG_NEED_RESCHED, TRACE_FLAG_PREEMPT_RESCHED), and the bytes
// that round it up, past its 8-byte header and payload.
func mask(page []byte, events []rbEvent, size int) {
	for _, e := range events {
		if e.rec == 0 {
			continue
		}
		page[e.rec+2] &^= 0x04 | 0x20
		for x := e.rec + 8 + size; x < e.rec+e.recLen; x++ {
			page[x] = 0
		}
	}
}

// hexDiff shows a's bytes where they differ from b's.
func hexDiff(a, b []byte) string {
	var s string
	for i := range a {
		if a[i] != b[i] {
			s += fmt.Sprintf("%d:%02x ", i, a[i])
			if len(s) > 300 {
				return s + "..."
			}
		}
	}
	return s + strconv.Itoa(len(a))
}
