package daemon

import (
	"runtime"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"golang.org/x/sys/unix"
)

// TestWriterIdentityChecked (issue 19.5): a client once chose the thread
// and CPU written into its records — another process's thread, CPU 65535.
// Now the thread is its own or its process's, and the CPU one that exists.
func TestWriterIdentityChecked(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	c := a.dial(t, s.sock)
	idx, _, err := c.Register(reg(a.addr(64), 0), "who u32 v", false)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.NewSession(client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Attach("user_events:who", false); err != nil {
		t.Fatal(err)
	}
	pid, tid := int32(unix.Getpid()), int32(unix.Gettid())
	ncpu := int32(ringcheck.PossibleCPUs)
	writes := []struct {
		name      string
		tid       int32
		cpu       int
		wantTID   int32
		wantCPU   int32
		forgedInc bool
	}{
		{"init's thread", 1, 0, pid, 0, true},
		{"a thread of ours", tid, 1 % int(ncpu), tid, 1 % ncpu, false},
		{"beyond pid_max", int32(ringcheck.PIDMax() + 5), 0, pid, 0, true},
		{"negative", -7, 0, pid, 0, true},
		{"CPU 65535", pid, 65535, pid, 65535 % ncpu, false},
	}
	for i, w := range writes {
		var rec [8]byte
		wire.LE.PutUint32(rec[:], idx)
		wire.LE.PutUint32(rec[4:], uint32(i))
		if _, err := c.Writev(w.tid, w.cpu, rec[:]); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
	}
	recs, _, _, err := ss.Poll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(writes) {
		t.Fatalf("%d records, want %d", len(recs), len(writes))
	}
	for _, r := range recs {
		i := wire.LE.Uint32(r.Raw[8:])
		w := writes[i]
		if r.PID != pid || r.TID != w.wantTID || r.CPU != w.wantCPU {
			t.Errorf("%s: pid %d tid %d cpu %d, want %d %d %d", w.name, r.PID, r.TID, r.CPU, pid, w.wantTID, w.wantCPU)
		}
	}
	c.Close()
	waitConns(t, s, 0)
	if !strings.Contains(s.log.String(), "forged_tid=3") {
		t.Errorf("the forged thread ids are not counted in the log:\n%s", s.log.String())
	}
}

// TestEmptyMessage: a 0-byte message is answered and logged, not taken
// for the end of the connection.
func TestEmptyMessage(t *testing.T) {
	s := serve(t, Config{})
	fd := rawConn(t, s.sock)
	if r := exchange(t, fd, helloMsg(0, 0)); len(r) == 0 {
		t.Fatal("hello refused")
	}
	r := exchange(t, fd, []byte{})
	if _, _, err := wire.ParseResult(r); err == nil || !strings.Contains(err.Error(), "no header") {
		t.Errorf("0-byte message: %v", err)
	}
	waitConns(t, s, 0)
	if !strings.Contains(s.log.String(), "shorter than a header") {
		t.Errorf("not logged:\n%s", s.log.String())
	}
}

// liveThread returns the id of a thread of this process that lives until
// the test ends: a thread id the daemon believes whatever else runs on
// the machine. (A made-up id such as 4242 is believed only while no task
// has it — on a busy machine, one may.)
func liveThread(t *testing.T) int32 {
	t.Helper()
	tid, done := make(chan int32), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, after the test
		tid <- int32(unix.Gettid())
		<-done
	}()
	t.Cleanup(func() { close(done) })
	return <-tid
}
