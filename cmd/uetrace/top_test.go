package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

func TestTopRender(t *testing.T) {
	prev := record.Stats{
		Samples: 100, Lost: 2, LostByEvent: true,
		Events: []record.EventStats{
			{System: "user_events", Name: "slow", Samples: 90, Lost: 2},
			{System: "user_events", Name: "fast", Samples: 10},
		},
		Processes: []record.ProcessStats{{PID: 7, Comm: "a b", Samples: 100}},
	}
	cur := record.Stats{
		Samples: 30100, Lost: 12, LostByEvent: true,
		Events: []record.EventStats{
			{System: "user_events", Name: "slow", Samples: 100, Lost: 2},
			{System: "user_events", Name: "fast", Samples: 29990, Lost: 10},
			{System: "user_events_multi", Name: "new.1", Samples: 10},
		},
		Processes: []record.ProcessStats{{PID: 7, Comm: "a b", Samples: 100}, {PID: 9, Comm: "w", Samples: 30000}},
	}
	v := newTopView(prev, cur, 2*time.Second, "kernel", "")
	v.at = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)
	want := []string{
		"uetrace top — kernel, every 2s: 15.0k events/s, 30100 events, 12 lost (5.0/s)",
		"q quit  p per event/per process",
		"",
		"  EVENTS/S       EVENTS       LOST  EVENT",
		"     15.0k        29990         10  user_events:fast",
		"       5.0          100          2  user_events:slow",
		"       5.0           10          0  user_events_multi:new.1",
	}
	if d := cmp.Diff(want, renderTop(v, false, 0, 0)); d != "" {
		t.Errorf("per event (-want +got):\n%s", d)
	}
	// A small terminal: the busiest rows that fit, lines cut at its width.
	cut := func(s string) string { return string([]rune(s)[:20]) }
	if d := cmp.Diff([]string{cut(want[0]), cut(want[1]), "", cut(want[3]), cut(want[4])},
		renderTop(v, false, 20, 5)); d != "" {
		t.Errorf("in 20x5 (-want +got):\n%s", d)
	}
	wantPID := []string{
		"  EVENTS/S       EVENTS      PID  COMM",
		"     15.0k        30000        9  w",
		"       0.0          100        7  a b",
	}
	if d := cmp.Diff(wantPID, renderTop(v, true, 0, 0)[3:]); d != "" {
		t.Errorf("per process (-want +got):\n%s", d)
	}
	wantPlain := []string{
		"top 2026-11-23T14:00:00Z interval=2.000 events/s=15000.0 events=30100 lost=12",
		"event user_events:fast events/s=14990.0 events=29990 lost=10",
		"event user_events:slow events/s=5.0 events=100 lost=2",
		"event user_events_multi:new.1 events/s=5.0 events=10 lost=0",
		`pid 9 comm="w" events/s=15000.0 events=30000`,
		`pid 7 comm="a b" events/s=0.0 events=100`,
	}
	if d := cmp.Diff(wantPlain, renderPlain(v, true)); d != "" {
		t.Errorf("plain (-want +got):\n%s", d)
	}
	// A daemon session does not count losses per event.
	cur.LostByEvent = false
	v = newTopView(prev, cur, 2*time.Second, "daemon", "no event matches x yet")
	got := renderTop(v, false, 0, 0)
	if got[2] != "note: no event matches x yet" || !strings.HasSuffix(got[5], "  -  user_events:fast") {
		t.Errorf("daemon view:\n%s", strings.Join(got, "\n"))
	}
}

// produceDaemon registers name on the daemon at sock and writes records of it
// while it is enabled, until the test ends.
func produceDaemon(t *testing.T, sock, name string) {
	t.Helper()
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := f.Register(name+" u32 i", 0)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint32(0); ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if ev.Enabled() {
				ev.Write([]byte{byte(i), byte(i >> 8), 0, 0})
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		f.Close()
	})
}

var plainEvent = regexp.MustCompile(`^event (\S+) events/s=([0-9.]+) events=(\d+) lost=(\S+)$`)

// Without a terminal top prints blocks of plain lines, -n of them.
func TestTopPlain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	produceDaemon(t, sock, "topplain_x")
	out, errs, code := cli(t, sock, "top", "-e", "topplain_*", "-d", "200ms", "-n", "15", "--by", "pid")
	if code != 0 {
		t.Fatalf("top: exit %d\n%s%s", code, out, errs)
	}
	blocks := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
	if len(blocks) != 15 {
		t.Fatalf("%d blocks, want 15:\n%s", len(blocks), out)
	}
	busy := 0
	for _, b := range blocks {
		lines := strings.Split(b, "\n")
		if !strings.HasPrefix(lines[0], "top ") {
			t.Fatalf("block starts %q", lines[0])
		}
		for _, l := range lines[1:] {
			m := plainEvent.FindStringSubmatch(l)
			if m == nil {
				if !strings.HasPrefix(l, "pid ") && !strings.HasPrefix(l, "note ") {
					t.Errorf("line %q", l)
				}
				continue
			}
			if m[1] != "user_events:topplain_x" || m[4] != "-" {
				t.Errorf("line %q: want user_events:topplain_x, lost - (a daemon)", l)
			}
			if rate, _ := strconv.ParseFloat(m[2], 64); rate > 0 && strings.Contains(b, fmt.Sprintf("pid %d comm=", os.Getpid())) {
				busy++
			}
		}
	}
	// The producer writes every millisecond: most intervals see records.
	if busy == 0 {
		t.Errorf("no block shows the producer's records with a rate:\n%s", out)
	}
}

// SIGTERM ends a plain top cleanly.
func TestTopPlainSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	produceDaemon(t, sock, "topsig_x")
	cmd, out := background(t, "--backend", "daemon", "--socket", sock, "top", "-d", "100ms")
	testutil.Wait(t, "a block with topsig_x", func() bool { return strings.Contains(out.String(), "event user_events:topsig_x ") })
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("top after SIGTERM: %v\n%s", err, out.String())
	}
}

// pty is a pseudo-terminal: the test holds the master, the program under
// test gets the slave as its terminal.
type pty struct {
	master, slave *os.File
	mu            sync.Mutex
	out           bytes.Buffer // all the master has read
	done          chan struct{}
}

func openPTY(t *testing.T, cols, rows uint16) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m, slave: s, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		r := bufio.NewReader(m)
		var b [4096]byte
		for {
			n, err := r.Read(b[:])
			p.mu.Lock()
			p.out.Write(b[:n])
			p.mu.Unlock()
			if err != nil {
				return // EIO once no process has the slave open
			}
		}
	}()
	t.Cleanup(func() {
		s.Close()
		m.Close()
		<-p.done
	})
	return p
}

func (p *pty) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// screen is the latest frame drawn: what follows the last cursor-home,
// without the escape sequences.
func (p *pty) screen() string {
	out := p.output()
	if i := strings.LastIndex(out, "\x1b[H"); i >= 0 {
		out = out[i:]
	}
	return ansi.ReplaceAllString(out, "")
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]`)

// start runs the binary with the slave as its controlling terminal and
// stdin, stdout and stderr.
func (p *pty) start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testutil.Uetrace(t), args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

var topHeader = regexp.MustCompile(`(?m)^uetrace top — daemon, every [0-9.]+m?s: `)

// On a terminal top refreshes in place until q (or Ctrl-C) and gives the
// terminal back as it found it.
func TestTopTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	produceDaemon(t, sock, "toptty_x")
	row := regexp.MustCompile(`(?m)^\s*([0-9.]+k?)\s+(\d+)\s+-\s+user_events:toptty_x\s*$`)
	for _, c := range []struct {
		name string
		key  string
	}{{"q", "q"}, {"ctrl-c", "\x03"}} {
		t.Run(c.name, func(t *testing.T) {
			p := openPTY(t, 100, 30)
			before, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			cmd := p.start(t, "--backend", "daemon", "--socket", sock, "top", "-d", "200ms", "-e", "toptty_*")
			testutil.Wait(t, "a refresh showing toptty_x at a non-zero rate", func() bool {
				m := row.FindStringSubmatch(p.screen())
				return m != nil && m[1] != "0.0"
			})
			// The header names the interval the rates were measured over:
			// 200ms, or longer on a busy machine.
			if !topHeader.MatchString(p.screen()) {
				t.Errorf("screen:\n%s", p.screen())
			}
			// The p key shows the processes: this one.
			p.master.WriteString("p")
			testutil.Wait(t, "the per-process view", func() bool {
				return strings.Contains(p.screen(), fmt.Sprintf(" %d  ", os.Getpid()))
			})
			p.master.WriteString(c.key)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("top after %q: %v\n%q", c.key, err, p.output())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("top still runs 10 s after %q:\n%s", c.key, p.screen())
			}
			// What top wrote last may still be on its way through the pty.
			testutil.Wait(t, "the alternate screen left", func() bool {
				return strings.Contains(p.output(), "\x1b[?25h\x1b[?1049l")
			})
			if out := p.output(); !strings.HasPrefix(out, "\x1b[?1049h\x1b[?25l") {
				t.Errorf("alternate screen not entered:\n%q", out)
			}
			after, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			if *after != *before {
				t.Errorf("terminal not restored: lflag %#x, was %#x", after.Lflag, before.Lflag)
			}
			if before.Lflag&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
				t.Errorf("the test's terminal was not in canonical mode with echo: %#x", before.Lflag)
			}
		})
	}
}

// --duration ends top by itself.
func TestTopDuration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	produceDaemon(t, sock, "topdur_x")
	start := time.Now()
	out, errs, code := cli(t, sock, "top", "-d", "100ms", "--duration", "1s")
	if code != 0 {
		t.Fatalf("top --duration: exit %d\n%s%s", code, out, errs)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("top --duration 1s returned after %v", d)
	}
	if !strings.HasPrefix(out, "top ") || !strings.Contains(out, "event user_events:topdur_x ") {
		t.Errorf("no block with the event in:\n%s", out)
	}
}

// top -r N: its threads run at SCHED_FIFO priority N, as perf top -r's do.
func TestTopRealtime(t *testing.T) {
	needRealtime(t)
	sock, _, _ := startServe(t)
	produceDaemon(t, sock, "toprt_x")
	top, out := background(t, "--backend", "daemon", "--socket", sock, "top", "-r", "3", "-d", "100ms")
	testutil.Wait(t, "top's first block", func() bool { return strings.Contains(out.String(), "event user_events:toprt_x ") })
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(top.Process.Pid) + "/task/*/sched")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("top's threads: %v %v", tasks, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // ended
		}
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "policy" && f[2] != "1" {
				t.Errorf("%s: policy %s, want 1 (SCHED_FIFO)", task, f[2])
			}
		}
	}
}
