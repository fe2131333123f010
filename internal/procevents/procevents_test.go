package procevents_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/procevents"
	"github.com/uetrace/uetrace/internal/procmem/procmemtest"
	"golang.org/x/sys/unix"
)

const timeout = 30 * time.Second

func listen(t *testing.T) *procevents.Listener {
	t.Helper()
	l, err := procevents.Listen()
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		if os.Getuid() != 0 {
			t.Skipf("not root: %v", err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.SetDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	return l
}

// until reads events until done says it has seen enough.
func until(t *testing.T, l *procevents.Listener, done func(procevents.Event) bool) {
	t.Helper()
	for {
		evs, err := l.Read()
		if errors.Is(err, procevents.ErrOverrun) {
			t.Log(err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if done(ev) {
				return
			}
		}
	}
}

// TestForkExecExit runs sh -c '/bin/true & wait' and sees the shell's fork
// of a child, the child's exec of true, and both exits.
func TestForkExecExit(t *testing.T) {
	l := listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "/bin/true & wait; echo $!")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sh := cmd.Process.Pid
	child, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sh printed %q", out)
	}
	// Everything happened before Output returned: the events are queued.
	seen := map[string]bool{}
	until(t, l, func(ev procevents.Event) bool {
		switch {
		case ev.Kind == procevents.Fork && ev.TGID == sh && ev.ParentTGID == os.Getpid():
			seen["fork sh"] = true
		case ev.Kind == procevents.Exec && ev.PID == sh && ev.TGID == sh:
			seen["exec sh"] = true
		case ev.Kind == procevents.Fork && ev.PID == child && ev.TGID == child && ev.ParentTGID == sh:
			seen["fork child"] = true
		case ev.Kind == procevents.Exec && ev.TGID == child:
			seen["exec child"] = true
		case ev.Kind == procevents.Exit && ev.PID == child && ev.TGID == child:
			if ev.ParentTGID != sh || ev.ExitCode != 0 {
				t.Errorf("child's exit: %+v", ev)
			}
			seen["exit child"] = true
		case ev.Kind == procevents.Exit && ev.PID == sh && ev.TGID == sh:
			seen["exit sh"] = true
			return true // the last of them
		}
		return false
	})
	for _, k := range []string{"fork sh", "exec sh", "fork child", "exec child", "exit child", "exit sh"} {
		if !seen[k] {
			t.Errorf("no %s event", k)
		}
	}
}

// TestThread sees a thread's creation as a fork with PID != TGID (its
// Parent* are the process's parent's, the thread's real_parent).
func TestThread(t *testing.T) {
	l := listen(t)
	// The Go runtime of a child starts threads of its own.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	thread := false
	until(t, l, func(ev procevents.Event) bool {
		if ev.Kind == procevents.Fork && ev.TGID == pid && ev.PID != pid {
			thread = true
		}
		return ev.Kind == procevents.Exit && ev.PID == pid
	})
	if !thread {
		t.Error("no thread creation seen")
	}
}

// TestOverrun fills a small socket buffer without reading: the next Read is
// ErrOverrun, and reading goes on afterwards.
func TestOverrun(t *testing.T) {
	l := listen(t)
	if err := l.SetReadBuffer(1); err != nil { // the kernel's minimum
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	script := strings.Repeat("/bin/true; ", 100)
	if err := exec.CommandContext(ctx, "sh", "-c", script).Run(); err != nil {
		t.Fatal(err)
	}
	overrun := false
	for range 1000 {
		_, err := l.Read()
		if errors.Is(err, procevents.ErrOverrun) {
			if !errors.Is(err, unix.ENOBUFS) {
				t.Error("ErrOverrun is not ENOBUFS")
			}
			overrun = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !overrun {
		t.Fatal("no ErrOverrun after 300 events into a minimal buffer")
	}
	// Reading goes on.
	if err := exec.CommandContext(ctx, "/bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	until(t, l, func(procevents.Event) bool { return true })
}

// TestOverrunSeenByWait: an overrun that Wait finds — the kernel tells it
// once, to whichever receive comes first, a peek too — is ReadNow's next
// answer. Before, Wait's peek took it and nobody heard of it: a follower
// (fusefs/callers) that waits, then reads what is queued, went on with
// events missing and never resynchronized (CI: TestOverrunResyncs).
func TestOverrunSeenByWait(t *testing.T) {
	l := listen(t)
	if err := l.SetReadBuffer(1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := exec.CommandContext(ctx, "sh", "-c", strings.Repeat("/bin/true; ", 100)).Run(); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(); err != nil {
		t.Fatal(err)
	}
	for {
		_, ok, err := l.ReadNow()
		if errors.Is(err, procevents.ErrOverrun) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatal("Wait and ReadNow drained the socket without telling the overrun")
		}
	}
}

func TestCloseWakesRead(t *testing.T) {
	l := listen(t)
	if err := l.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := l.Read(); err != nil && !errors.Is(err, procevents.ErrOverrun) {
				done <- err
				return
			}
		}
	}()
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close: %v", err)
		}
	case <-time.After(timeout):
		t.Fatal("Read did not return after Close")
	}
}

func TestDeadline(t *testing.T) {
	l := listen(t)
	if err := l.SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := l.Read()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return
		}
		if err != nil && !errors.Is(err, procevents.ErrOverrun) {
			t.Fatal(err)
		}
	}
}

// msg builds one connector datagram message carrying a proc_event.
func msg(what uint32, data ...int32) []byte {
	ne := binary.NativeEndian
	ev := ne.AppendUint32(nil, what)
	ev = ne.AppendUint32(ev, 1)         // cpu
	ev = ne.AppendUint64(ev, 123456789) // timestamp
	for _, d := range data {
		ev = ne.AppendUint32(ev, uint32(d))
	}
	cn := ne.AppendUint32(nil, 1) // idx
	cn = ne.AppendUint32(cn, 1)   // val
	cn = ne.AppendUint32(cn, 7)   // seq
	cn = ne.AppendUint32(cn, 0)   // ack
	cn = ne.AppendUint16(cn, uint16(len(ev)))
	cn = ne.AppendUint16(cn, 0)
	cn = append(cn, ev...)
	b := ne.AppendUint32(nil, uint32(16+len(cn)))
	b = ne.AppendUint16(b, unix.NLMSG_DONE)
	b = ne.AppendUint16(b, 0)
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint32(b, 0)
	b = append(b, cn...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestDecode(t *testing.T) {
	b := msg(1, 10, 10, 11, 11)
	b = append(b, msg(2, 11, 11)...)
	b = append(b, msg(0x200, 11, 11, 'a', 0)...) // comm: skipped
	b = append(b, msg(0x80000000, 11, 11, 256, 17, 10, 10)...)
	b = append(b, msg(0)...) // the ack of LISTEN: skipped
	evs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []procevents.Event{
		{Kind: procevents.Fork, CPU: 1, Timestamp: 123456789, ParentPID: 10, ParentTGID: 10, PID: 11, TGID: 11},
		{Kind: procevents.Exec, CPU: 1, Timestamp: 123456789, PID: 11, TGID: 11},
		{Kind: procevents.Exit, CPU: 1, Timestamp: 123456789, PID: 11, TGID: 11, ExitCode: 256, ParentPID: 10, ParentTGID: 10},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %+v", evs)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
	// Cut short anywhere: EINVAL with the events before.
	for n := 1; n < len(b); n++ {
		evs, err := Decode(b[:n])
		if err != nil && !errors.Is(err, unix.EINVAL) {
			t.Fatalf("cut at %d: %v", n, err)
		}
		if len(evs) > 3 {
			t.Fatalf("cut at %d: %d events", n, len(evs))
		}
	}
	if _, err := Decode(msg(1, 10, 10)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("short fork: %v", err)
	}
}

// Decode is procevents.Decode (a name for the table above).
var Decode = procevents.Decode

func FuzzDecode(f *testing.F) {
	f.Add(msg(1, 10, 10, 11, 11))
	f.Add(append(msg(2, 11, 11), msg(0x80000000, 11, 11, 0, 0, 10, 10)...))
	f.Add(msg(0x80000000, 11, 11, 0, 0))
	f.Add([]byte{})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := procevents.Decode(b)
		if err != nil && !errors.Is(err, unix.EINVAL) {
			t.Fatalf("error not EINVAL: %v", err)
		}
		for _, ev := range evs {
			if ev.Kind < procevents.Fork || ev.Kind > procevents.Exit {
				t.Fatalf("kind %v", ev.Kind)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	d := append(msg(1, 10, 10, 11, 11), msg(0x80000000, 11, 11, 0, 0, 10, 10)...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := procevents.Decode(d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestListenUnprivileged: before Linux 6.6 joining the connector needs
// CAP_NET_ADMIN, and Listen says so; since, any user of the initial
// namespaces may listen, and receives the events.
func TestListenUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a thread as another user")
	}
	var l *procevents.Listener
	err := procmemtest.AsUser(t, 65534, func() error {
		var err error
		l, err = procevents.Listen()
		return err
	})
	if err != nil {
		if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "CAP_NET_ADMIN") {
			t.Fatalf("Listen as nobody: %v", err)
		}
		t.Logf("this kernel refuses: %v", err)
		return
	}
	defer l.Close()
	if err := l.SetDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	until(t, l, func(ev procevents.Event) bool { return ev.Kind == procevents.Exit && ev.PID == cmd.Process.Pid })
}
