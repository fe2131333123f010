package subsys

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var fuzzWritable = []string{
	FileDynamicEvents, FileSetEvent, FileTracingOn, FileBufferSizeKB,
	"events/enable", "events/user_events/enable", "events/user_events/a/enable", FileTrace, FileStatus,
	FileTraceClock, FileTraceOptions, FileCurrentTracer, FileBufferPercent, FileTracingCPUMask,
	"per_cpu/cpu0/buffer_size_kb", "per_cpu/cpu0/trace",
}

// fuzzSettings are the files a write to sets one value: one that fails
// leaves it as it was.
var fuzzSettings = map[string]bool{FileTraceClock: true, FileTraceOptions: true, FileCurrentTracer: true,
	FileBufferPercent: true, FileTracingCPUMask: true, FileTracingOn: true, FileBufferSizeKB: true,
	"per_cpu/cpu0/buffer_size_kb": true}

// FuzzTracefsWrite feeds arbitrary text to every writable tracefs file and
// arbitrary bytes to the ioctls, then checks that the subsystem is still
// consistent: every error wraps an errno, the status text parses, and
// dynamic_events lists exactly the events status counts.
func FuzzTracefsWrite(f *testing.F) {
	for _, seed := range []string{
		"u:a u32 x\nu:b char[4] s;u8 t\n!u:b char[4] s; u8 t\n", "u:a u32 x # c\n\n-:a u32 x",
		"user_events:a\n!a", "1\n", "+0", "0x1", "u:" + strings.Repeat("x", 5000), "u:a\x00u:b",
		"!u:user_events/a u32 x", "u:m struct s v 4294967295",
		"mono", " local\n", "norecord-cmd", "record-tgid ", "nop", "100", "ff,ffffffff", "1\x002",
	} {
		for i := range fuzzWritable {
			f.Add(i, seed, []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, which int, text string, reg []byte) {
		e := newEnv(t)
		e.write(FileDynamicEvents, "u:a u32 x")
		fsys := e.s.FS()
		path := fuzzWritable[(which%len(fuzzWritable)+len(fuzzWritable))%len(fuzzWritable)]
		for _, flags := range []int{os.O_APPEND, os.O_TRUNC} {
			before, _ := fsys.ReadFile(path, root)
			err := fsys.WriteFile(path, []byte(text), flags, root)
			var errno unix.Errno
			if err != nil && !errors.As(err, &errno) {
				t.Fatalf("write %q to %s: %v does not wrap an errno", text, path, err)
			}
			if after, _ := fsys.ReadFile(path, root); err != nil && fuzzSettings[path] && string(after) != string(before) {
				t.Fatalf("write %q to %s failed (%v) and changed it from %q to %q", text, path, err, before, after)
			}
		}
		file := e.s.Open()
		_, err := file.Register(e.p, root, RegisterArgs{Reg: reg, Name: text})
		var errno unix.Errno
		if err != nil && !errors.As(err, &errno) {
			t.Fatalf("register: %v does not wrap an errno", err)
		}
		if err := file.Unregister(e.p, reg); err != nil && !errors.As(err, &errno) {
			t.Fatalf("unregister: %v does not wrap an errno", err)
		}
		_, _ = file.Writev(w0, reg)
		file.Close()

		status := e.read(FileStatus)
		i := strings.Index(status, "\nActive: ")
		if i < 0 || !strings.HasSuffix(status, "\n") {
			t.Fatalf("status text %q", status)
		}
		listed := strings.Count(status[:i], "\n")
		var active, busy int
		if _, err := fmt.Sscanf(status[i:], "\nActive: %d\nBusy: %d\n", &active, &busy); err != nil || active != listed {
			t.Fatalf("status text %q: %d lines, Active %d (%v)", status, listed, active, err)
		}
		if got := len(e.s.Events()); got != active {
			t.Fatalf("status lists %d events, registry has %d", active, got)
		}
		if n := strings.Count(e.read(FileDynamicEvents), "\n"); n != active {
			t.Fatalf("dynamic_events lists %d events, status %d", n, active)
		}
	})
}
