package userevents_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// stoppedRing is a File on a daemon in a child process, with a 4 KiB ring
// and an event enabled in the trace, whose writes the test makes while
// the daemon is stopped.
type stoppedRing struct {
	f    *userevents.File
	ev   *userevents.Event
	fs   *tracefs.Tracefs
	proc *os.Process
	name string
}

func newStoppedRing(t *testing.T, base string) *stoppedRing {
	t.Helper()
	sock, proc := userevents.DaemonProcess(t)
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport, RingKB: 4}
	f, err := userevents.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s := &stoppedRing{f: f, proc: proc, name: uniq(base)}
	s.ev = register(t, f, s.name+" u64 v", 0)
	s.fs = openTracefs(t, o)
	setEnable(t, s.fs, "user_events", s.name, true)
	waitBit(t, s.ev, true)
	return s
}

// write writes v.
func (s *stoppedRing) write(t *testing.T, v int) {
	t.Helper()
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], uint64(v))
	if err := s.ev.Write(b[:]); err != nil {
		t.Fatal(err)
	}
}

// writeStopped writes 0..n-1 with the daemon stopped — it drains nothing,
// and a 4 KiB ring holds some 90 records — then lets it go on.
func (s *stoppedRing) writeStopped(t *testing.T, n int) {
	t.Helper()
	if err := s.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, s.proc.Pid)
	for i := range n {
		s.write(t, i)
	}
	if err := s.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

var lostLine = regexp.MustCompile(`(?m)^CPU:\d+ \[LOST (\d+) EVENTS\]$`)

// traced reads the trace: the event's records in it, the sum of its LOST
// lines, and the text.
func (s *stoppedRing) traced(t *testing.T) (records int, lost uint64, text string) {
	t.Helper()
	tr, err := s.fs.ReadFile("trace")
	if err != nil {
		t.Fatal(err)
	}
	text = string(tr)
	for _, m := range lostLine.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		lost += n
	}
	return strings.Count(text, s.name+": v="), lost, text
}

// TestRingDropsReachTheTrace: records a full ring dropped — the daemon
// stopped, the writes succeeding, as writes to a kernel whose ring buffer
// is full do — are counted for the event (Event.Dropped), told to the
// daemon with the next write into their ring, and shown in the trace as
// "CPU:N [LOST n EVENTS]": records in the trace plus the LOST counts are
// every write.
func TestRingDropsReachTheTrace(t *testing.T) {
	s := newStoppedRing(t, "ring_lost")
	const stopped, after = 1000, 10
	s.writeStopped(t, stopped)
	if d := s.ev.Dropped(); d < stopped/2 {
		t.Fatalf("%d of %d writes dropped into a 4 KiB ring with the daemon stopped", d, stopped)
	}
	// A read of the trace has the daemon drain the ring first; then the
	// first write finds room and tells the daemon what was dropped.
	s.traced(t)
	for i := range after {
		s.write(t, stopped+i)
	}
	dropped := s.ev.Dropped()
	// Each ring's drops go with the next write into that ring: a writer
	// that moved to another CPU meanwhile leaves some to the File's
	// retry (TestRingDropsToldWithoutAnotherWrite), which is waited for.
	var records int
	var lost uint64
	var text string
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		records, lost, text = s.traced(t)
		if uint64(records)+lost == stopped+after || time.Since(start) > time.Minute {
			break
		}
	}
	t.Logf("%d written: %d in the trace, %d LOST, %d dropped", stopped+after, records, lost, dropped)
	if lost != dropped || uint64(records)+lost != stopped+after {
		t.Errorf("%d written, %d dropped: the trace has %d records and LOST %d:\n%s", stopped+after, dropped, records, lost, text)
	}
}

// TestRingDropsToldWithoutAnotherWrite: drops are told to the daemon even
// when nothing is written after them — by File.Sync at once, and by the
// File's own retry when no one calls it — so that the last writes of a
// program are not lost silently.
func TestRingDropsToldWithoutAnotherWrite(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(map[bool]string{true: "Sync", false: "retry"}[sync], func(t *testing.T) {
			s := newStoppedRing(t, "ring_told")
			const n = 1000
			s.writeStopped(t, n)
			dropped := s.ev.Dropped()
			if dropped == 0 {
				t.Fatal("nothing dropped into a 4 KiB ring with the daemon stopped")
			}
			if sync {
				if err := s.f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			var records int
			var lost uint64
			for start := time.Now(); ; time.Sleep(time.Millisecond) {
				records, lost, _ = s.traced(t)
				if uint64(records)+lost == n || sync || time.Since(start) > time.Minute {
					break
				}
			}
			if lost != dropped || uint64(records)+lost != n {
				t.Errorf("%d written, %d dropped: the trace has %d records and LOST %d", n, dropped, records, lost)
			}
		})
	}
}

// waitStopped waits until every thread of process pid is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
		running := len(tasks) == 0
		for _, st := range tasks {
			b, err := os.ReadFile(st)
			// The state follows the ")" that ends the command name.
			if i := strings.LastIndexByte(string(b), ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'T' {
				running = true
			}
		}
		if !running {
			return
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("process %d did not stop", pid)
		}
	}
}
