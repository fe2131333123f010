package userevents_test

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/daemon"
	"github.com/uetrace/uetrace/userevents"
)

// daemonProcess starts a daemon in a child process (the test binary, whose
// TestMain serves when UETRACE_BENCH_DAEMON names a socket) and returns
// its socket once it answers, and the process.
func daemonProcess(t *testing.T) (string, *os.Process) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "UETRACE_BENCH_DAEMON="+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if c, err := daemon.Dial(sock, nil); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatal("the daemon did not start")
		}
	}
	return sock, cmd.Process
}

var lostLine = regexp.MustCompile(`(?m)^CPU:\d+ \[LOST (\d+) EVENTS\]$`)

// TestRingDropsReachTheTrace: records a full ring dropped — the daemon
// stopped, the writes succeeding, as writes to a kernel whose ring buffer
// is full do — are counted for the event (Event.Dropped), told to the
// daemon with the next write, and shown in the trace as "CPU:N [LOST n
// EVENTS]": records in the trace plus the LOST counts are every write.
func TestRingDropsReachTheTrace(t *testing.T) {
	sock, proc := daemonProcess(t)
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport, RingKB: 4}
	f, err := userevents.Open(*o)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	name := uniq("ring_lost")
	ev := register(t, f, name+" u64 v", 0)
	fs := tracefs(t, o)
	setEnable(t, fs, "user_events", name, true)
	waitBit(t, ev, true)

	write := func(i int) {
		t.Helper()
		var v [8]byte
		binary.NativeEndian.PutUint64(v[:], uint64(i))
		if err := ev.Write(v[:]); err != nil {
			t.Fatal(err)
		}
	}
	// A stopped daemon drains nothing: a 4 KiB ring holds some 90 records.
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, proc.Pid)
	const stopped, after = 1000, 10
	for i := range stopped {
		write(i)
	}
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if d := ev.Dropped(); d < stopped/2 {
		t.Fatalf("%d of %d writes dropped into a 4 KiB ring with the daemon stopped", d, stopped)
	}
	// A read of the trace has the daemon drain the ring first; then the
	// first write finds room and tells the daemon what was dropped.
	if _, err := fs.ReadFile("trace"); err != nil {
		t.Fatal(err)
	}
	for i := range after {
		write(stopped + i)
	}
	dropped := ev.Dropped()
	tr, err := fs.ReadFile("trace")
	if err != nil {
		t.Fatal(err)
	}
	text := string(tr)
	records := strings.Count(text, name+": v=")
	var lost uint64
	for _, m := range lostLine.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		lost += n
	}
	t.Logf("%d written: %d in the trace, %d LOST, %d dropped", stopped+after, records, lost, dropped)
	if lost != dropped || uint64(records)+lost != stopped+after {
		t.Errorf("%d written, %d dropped: the trace has %d records and LOST %d:\n%s", stopped+after, dropped, records, lost, text)
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

// TestRingDropsToldWithoutAnotherWrite: drops are told to the daemon even
// when nothing is written after them — by File.Sync at once, and by the
// File's own retry when no one calls it — so that the last writes of a
// program are not lost silently.
func TestRingDropsToldWithoutAnotherWrite(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(map[bool]string{true: "Sync", false: "retry"}[sync], func(t *testing.T) {
			sock, proc := daemonProcess(t)
			o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, RingKB: 4}
			f, err := userevents.Open(*o)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			name := uniq("ring_told")
			ev := register(t, f, name+" u64 v", 0)
			fs := tracefs(t, o)
			setEnable(t, fs, "user_events", name, true)
			waitBit(t, ev, true)
			if err := proc.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, proc.Pid)
			const n = 1000
			var v [8]byte
			for i := range n {
				binary.NativeEndian.PutUint64(v[:], uint64(i))
				if err := ev.Write(v[:]); err != nil {
					t.Fatal(err)
				}
			}
			if err := proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			dropped := ev.Dropped()
			if dropped == 0 {
				t.Fatal("nothing dropped into a 4 KiB ring with the daemon stopped")
			}
			if sync {
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			var records int
			var lost uint64
			for start := time.Now(); ; time.Sleep(time.Millisecond) {
				tr, err := fs.ReadFile("trace")
				if err != nil {
					t.Fatal(err)
				}
				records, lost = strings.Count(string(tr), name+": v="), 0
				for _, m := range lostLine.FindAllStringSubmatch(string(tr), -1) {
					k, _ := strconv.ParseUint(m[1], 10, 64)
					lost += k
				}
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
