package callers_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/procmem"
	"github.com/uetrace/uetrace/internal/procmem/procmemtest"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

const pg = 4096

var root = subsys.Cred{PerfmonCapable: true}

// Where the tests put things in the child's read-write page.
const (
	offWord  = 0x100 // the enable word
	offReg   = 0x200 // struct user_reg
	offUnreg = 0x280 // struct user_unreg
	offName  = 0x300 // the command
)

type env struct {
	t     *testing.T
	s     *subsys.Subsystem
	cs    *callers.Callers
	bin   string
	child *procmemtest.Child
	f     *subsys.File
}

func newEnv(t *testing.T) *env {
	t.Helper()
	bin := procmemtest.Build(t)
	s := subsys.New(subsys.Options{})
	cs := callers.New(s)
	t.Cleanup(func() { cs.Close() })
	e := &env{t: t, s: s, cs: cs, bin: bin, child: procmemtest.Start(t, bin), f: s.Open()}
	t.Cleanup(func() { e.f.Close() })
	return e
}

func (e *env) get(tid int) *callers.Caller {
	e.t.Helper()
	c, err := e.cs.Get(tid)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) write(c *callers.Caller, addr uint64, b []byte) {
	e.t.Helper()
	if _, err := c.Mem.WriteAt(b, addr); err != nil {
		e.t.Fatal(err)
	}
}

// putReg writes a struct user_reg for bit of the child's enable word and
// the command cmd, and returns its address.
func (e *env) putReg(c *callers.Caller, bit uint8, cmd string) uint64 {
	e.t.Helper()
	rw := e.child.RW
	e.write(c, rw+offName, append([]byte(cmd), 0))
	r := abi.UserReg{Size: abi.UserRegSize, EnableBit: bit, EnableSize: 4, EnableAddr: rw + offWord, NameArgs: rw + offName}
	e.write(c, rw+offReg, r.Bytes())
	return rw + offReg
}

func (e *env) register(c *callers.Caller, bit uint8, cmd string) int32 {
	e.t.Helper()
	idx, err := callers.Register(e.f, c, root, e.putReg(c, bit, cmd))
	if err != nil {
		e.t.Fatal(err)
	}
	return idx
}

func (e *env) event(name string) *subsys.Event { return e.s.Lookup("user_events", name) }

func wantErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	if want == 0 && err != nil || want != 0 && !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func TestThreadsShareProcess(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	tid := e.child.Thread()
	ct := e.get(tid)
	if ct.TID != tid || ct.TGID != e.child.Pid || ct.Process != c.Process || ct.Mem != c.Mem {
		t.Fatalf("thread %d: %+v, process %+v", tid, ct, c)
	}
	if st := e.cs.Stats(); st.Processes != 1 {
		t.Errorf("stats %+v", st)
	}
	if _, err := e.cs.Get(1 << 30); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Get of no thread: %v", err)
	}
}

func TestRegister(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	rw := e.child.RW
	e.write(c, rw+offWord, make([]byte, 8))
	if idx := e.register(c, 3, "callers_a u32 a"); idx != 0 {
		t.Fatalf("write index %d", idx)
	}
	// The index is stored back, the bit reflects the event.
	if w := e.child.Word(rw + offReg + 24); uint32(w) != 0 {
		t.Fatalf("write_index %#x", w)
	}
	if idx := e.register(c, 4, "callers_b u32 b"); idx != 1 {
		t.Fatalf("second write index %d", idx)
	}
	if w := e.child.Word(rw + offReg + 24); uint32(w) != 1 {
		t.Fatalf("second write_index %#x", w)
	}
	ss := e.s.NewSession(subsys.SessionOptions{})
	if err := ss.Attach(e.event("callers_a")); err != nil {
		t.Fatal(err)
	}
	if w := e.child.Word(rw + offWord); w != 1<<3 {
		t.Fatalf("enabled: word %#x", w)
	}
	ss.Close()
	if w := e.child.Word(rw + offWord); w != 0 {
		t.Fatalf("disabled: word %#x", w)
	}
}

// TestRegisterErrors reads the argument as the kernel does, and gets its
// errno in its order.
func TestRegisterErrors(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	rw, hole, ro := e.child.RW, e.child.Hole, e.child.RO
	reg := func(mod func(*abi.UserReg)) []byte {
		r := abi.UserReg{Size: abi.UserRegSize, EnableBit: 1, EnableSize: 4, EnableAddr: rw + offWord, NameArgs: rw + offName}
		mod(&r)
		return r.Bytes()
	}
	e.write(c, rw+offName, []byte("callers_err u32 a\x00"))
	if idx := e.register(c, 0, "callers_err u32 a"); idx != 0 {
		t.Fatal(idx)
	}
	// 600 bytes without a NUL, then one.
	e.write(c, rw+0x800, append([]byte(strings.Repeat("x", 600)), 0))
	for _, tc := range []struct {
		name string
		at   uint64 // where the struct goes (0: offReg)
		b    []byte
		want unix.Errno
	}{
		{"struct in the hole", hole, nil, unix.EFAULT},
		{"size over a page", 0, binary.NativeEndian.AppendUint32(nil, pg+1), unix.E2BIG},
		{"size under 28", 0, binary.NativeEndian.AppendUint32(nil, 20), unix.EINVAL},
		{"non-zero past 28", 0, append(reg(func(r *abi.UserReg) { r.Size = 32 }), 0, 0, 1, 0), unix.E2BIG},
		{"zeros past 28", 0, append(reg(func(r *abi.UserReg) { r.Size = 32; r.EnableBit = 2 }), 0, 0, 0, 0), 0},
		{"bad flags", 0, reg(func(r *abi.UserReg) { r.Flags = 4 }), unix.EINVAL},
		{"already registered", 0, reg(func(r *abi.UserReg) { r.EnableBit = 0 }), unix.EADDRINUSE},
		{"name in the hole", 0, reg(func(r *abi.UserReg) { r.NameArgs = hole }), unix.EFAULT},
		{"name runs into the hole", 0, reg(func(r *abi.UserReg) { r.NameArgs = hole - 4 }), unix.EFAULT},
		{"name of 600 bytes", 0, reg(func(r *abi.UserReg) { r.NameArgs = rw + 0x800 }), unix.EINVAL},
		{"name of 512 bytes", 0, reg(func(r *abi.UserReg) { r.NameArgs = rw + 0x800 + 600 - 512 }), unix.EINVAL},
		{"name of 511 bytes", 0, reg(func(r *abi.UserReg) { r.NameArgs = rw + 0x800 + 600 - 511 }), 0}, // within MAX_EVENT_DESC: a name without fields
		{"read-only enable word", 0, reg(func(r *abi.UserReg) { r.EnableAddr = ro }), unix.ENOMEM},
		{"unmapped enable word", 0, reg(func(r *abi.UserReg) { r.EnableAddr = hole + 8 }), unix.ENOMEM},
		{"kernel address", 0, reg(func(r *abi.UserReg) { r.EnableAddr = 1 << 63 }), unix.EFAULT},
		// Last: it overwrites the 'x' run before the hole.
		{"struct runs into the hole", hole - 20, reg(func(*abi.UserReg) {})[:20], unix.EFAULT},
	} {
		at := tc.at
		if at == 0 {
			at = rw + offReg
		}
		if at != hole {
			e.write(c, at, tc.b)
		}
		_, err := callers.Register(e.f, c, root, at)
		wantErrno(t, tc.name, err, tc.want)
	}
}

// TestWriteIndexFault: a struct the caller can read but not write
// registers; the store's failure is ignored, as Linux does, and counted.
func TestWriteIndexFault(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	rw2 := e.child.RW2
	r := abi.UserReg{Size: abi.UserRegSize, EnableBit: 0, EnableSize: 8, EnableAddr: e.child.RW + offWord, NameArgs: rw2 + 64}
	e.write(c, rw2, r.Bytes())
	e.write(c, rw2+64, []byte("callers_ro u32 a\x00"))
	if got := e.child.Do("protect %x", rw2); got != "ok" {
		t.Fatal(got)
	}
	idx, err := callers.Register(e.f, c, root, rw2)
	if err != nil || idx != 0 {
		t.Fatalf("Register: %d, %v", idx, err)
	}
	if st := e.cs.Stats(); st.WriteIndexFaults != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnregister(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	rw := e.child.RW
	e.write(c, rw+offWord, make([]byte, 8))
	e.register(c, 5, "callers_u u32 a")
	ss := e.s.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if err := ss.Attach(e.event("callers_u")); err != nil {
		t.Fatal(err)
	}
	if w := e.child.Word(rw + offWord); w != 1<<5 {
		t.Fatalf("word %#x", w)
	}
	u := abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: 5, DisableAddr: rw + offWord}
	bad := u
	bad.Reserved = 1
	e.write(c, rw+offUnreg, bad.Bytes())
	wantErrno(t, "reserved", callers.Unregister(e.f, c, rw+offUnreg), unix.EINVAL)
	wantErrno(t, "in the hole", callers.Unregister(e.f, c, e.child.Hole), unix.EFAULT)
	e.write(c, rw+offUnreg, u.Bytes())
	wantErrno(t, "unregister", callers.Unregister(e.f, c, rw+offUnreg), 0)
	if w := e.child.Word(rw + offWord); w != 0 {
		t.Fatalf("after unregister: word %#x", w)
	}
	wantErrno(t, "again", callers.Unregister(e.f, c, rw+offUnreg), unix.ENOENT)
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	rw := e.child.RW
	if _, err := e.s.WriteDynamicEvents([]byte("u:callers_p u32 a"), root); err != nil {
		t.Fatal(err)
	}
	e.write(c, rw+offName, []byte("callers_p\x00"))
	wantErrno(t, "in the hole", callers.Delete(e.f, c, root, e.child.Hole), unix.EFAULT)
	wantErrno(t, "into the hole", callers.Delete(e.f, c, root, e.child.Hole-16), unix.EFAULT)
	e.write(c, rw+0x800, []byte(strings.Repeat("y", 600)+"\x00"))
	wantErrno(t, "600 bytes", callers.Delete(e.f, c, root, rw+0x800), unix.EINVAL)
	wantErrno(t, "unprivileged", callers.Delete(e.f, c, subsys.Cred{}, rw+offName), unix.EPERM)
	wantErrno(t, "delete", callers.Delete(e.f, c, root, rw+offName), 0)
	if e.event("callers_p") != nil {
		t.Fatal("the event is still there")
	}
	wantErrno(t, "again", callers.Delete(e.f, c, root, rw+offName), unix.ENOENT)
}

// TestExitMidway: a caller gone before its request is read gets an error,
// and its process is released.
func TestExitMidway(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	arg := e.putReg(c, 0, "callers_x u32 a")
	e.child.Kill()
	_, err := callers.Register(e.f, c, root, arg)
	if !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.EBADF) {
		t.Errorf("Register by a dead caller: %v", err)
	}
	testutil.Wait(t, "the exit to be seen", func() bool {
		st := e.cs.Stats()
		return st.Exits == 1 && st.Processes == 0
	})
	if _, err := e.cs.Get(e.child.Pid); err == nil {
		// The pid was reused already: then it is another process.
		t.Log("the pid was reused")
	}
}

// TestExitReleases: the exit of a caller drops its enablers' references.
func TestExitReleases(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	e.register(c, 0, "callers_e u32 a")
	e.f.Close() // the enabler holds the event now
	if e.event("callers_e") == nil {
		t.Fatal("the event went with the file")
	}
	e.child.Kill()
	testutil.Wait(t, "the event to go", func() bool { return e.event("callers_e") == nil })
	if st := string(e.s.AppendStatus(nil)); !strings.Contains(st, "Active: 0") {
		t.Errorf("user_events_status:\n%s", st)
	}
}

// TestLazyExec: without Follow, the exec is found at the next Get.
func TestLazyExec(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	e.register(c, 0, "callers_l u32 a")
	e.f.Close()
	e.child.Exec()
	if e.event("callers_l") == nil {
		t.Fatal("released before anyone looked")
	}
	c2 := e.get(e.child.Pid)
	if c2.Process == c.Process {
		t.Fatal("the same Process after exec")
	}
	if e.event("callers_l") != nil {
		t.Fatal("the exec'd process's enabler still holds the event")
	}
	if st := e.cs.Stats(); st.Execs != 1 || st.Processes != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestGetKnown: a known process is its Caller without its status read; an
// unknown one, or one that exec'd, is Get's answer.
func TestGetKnown(t *testing.T) {
	e := newEnv(t)
	tid := e.child.Thread()
	c0, err := e.cs.GetKnown(tid, e.child.Pid) // not known yet: Get's
	if err != nil {
		t.Fatal(err)
	}
	c := e.get(e.child.Pid)
	if c0.Process != c.Process || c0.TID != tid || c0.TGID != e.child.Pid {
		t.Fatalf("GetKnown of a new process: %+v; Get: %+v", c0, c)
	}
	ck, err := e.cs.GetKnown(tid, e.child.Pid)
	if err != nil || ck.Process != c.Process || ck.Mem != c.Mem || ck.TID != tid {
		t.Fatalf("GetKnown: %+v, %v; want thread %d of %+v", ck, err, tid, c)
	}
	e.register(c, 0, "callers_k u32 a")
	e.f.Close()
	e.child.Exec()
	c2, err := e.cs.GetKnown(e.child.Pid, e.child.Pid)
	if err != nil || c2.Process == c.Process {
		t.Fatalf("GetKnown after exec: %+v, %v; want a new Process", c2, err)
	}
	if e.event("callers_k") != nil {
		t.Fatal("the exec'd process's enabler still holds the event")
	}
	e.cs.Close()
	if _, err := e.cs.GetKnown(e.child.Pid, e.child.Pid); !errors.Is(err, callers.ErrClosed) {
		t.Errorf("GetKnown after Close: %v", err)
	}
}

// BenchmarkGetKnown is Get for a thread whose process is known: no status read.
func BenchmarkGetKnown(b *testing.B) {
	s := subsys.New(subsys.Options{})
	cs := callers.New(s)
	defer cs.Close()
	tid := unix.Gettid()
	if _, err := cs.Get(tid); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.GetKnown(tid, unix.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestResync(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	e.register(c, 0, "callers_r u32 a")
	e.f.Close()
	e.child.Exec()
	e.cs.Resync()
	if e.event("callers_r") != nil {
		t.Fatal("Resync did not release the exec'd process")
	}
	if st := e.cs.Stats(); st.Execs != 1 || st.Processes != 0 || st.Resyncs != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestLazyFork: without Follow, a forked child's first Get gives it a copy
// of its parent's enablers; its memory is its own.
func TestLazyFork(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	rw := e.child.RW
	e.write(c, rw+offWord, make([]byte, 8))
	e.register(c, 2, "callers_f u32 a")
	gpid := e.child.Fork(false)
	g := e.get(gpid)
	if g.Process == c.Process {
		t.Fatal("the child shares its parent's Process")
	}
	if st := e.cs.Stats(); st.Forks != 1 || st.Processes != 2 {
		t.Errorf("stats %+v", st)
	}
	ss := e.s.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if err := ss.Attach(e.event("callers_f")); err != nil {
		t.Fatal(err)
	}
	if w := readWord(t, g.Mem, rw+offWord); w != 1<<2 {
		t.Fatalf("the child's word %#x", w)
	}
	// The child unregisters its copy: its bit is cleared, the parent's
	// stays.
	u := abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: 2, DisableAddr: rw + offWord}
	if _, err := g.Mem.WriteAt(u.Bytes(), rw+offUnreg); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "the child's unregister", callers.Unregister(e.f, g, rw+offUnreg), 0)
	if w := readWord(t, g.Mem, rw+offWord); w != 0 {
		t.Fatalf("the child's word %#x after its unregister", w)
	}
	if w := e.child.Word(rw + offWord); w != 1<<2 {
		t.Fatalf("the parent's word %#x after the child's unregister", w)
	}
}

func readWord(t *testing.T, m *procmem.Mem, addr uint64) uint64 {
	t.Helper()
	var b [8]byte
	if _, err := m.ReadAt(b[:], addr); err != nil {
		t.Fatal(err)
	}
	return binary.NativeEndian.Uint64(b[:])
}

func follow(t *testing.T, e *env) {
	t.Helper()
	if err := e.cs.Follow(); err != nil {
		if os.Getuid() != 0 && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) {
			t.Skipf("not root: %v", err)
		}
		t.Fatal(err)
	}
}

// TestFollowFork: with Follow, a fork of a caller is copied when the kernel
// tells of it — the grandchild, which never calls, gets its own bit updates
// — and the event lives while the grandchild holds its copy.
func TestFollowFork(t *testing.T) {
	e := newEnv(t)
	follow(t, e)
	c := e.get(e.child.Pid)
	rw := e.child.RW
	e.write(c, rw+offWord, make([]byte, 8))
	e.register(c, 6, "callers_ff u32 a")
	gpid := e.child.Fork(false)
	testutil.Wait(t, "the fork to be seen", func() bool { return e.cs.Stats().Forks == 1 })
	gm, err := procmem.Open(gpid)
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	ss := e.s.NewSession(subsys.SessionOptions{})
	if err := ss.Attach(e.event("callers_ff")); err != nil {
		t.Fatal(err)
	}
	if w := readWord(t, gm, rw+offWord); w != 1<<6 {
		t.Fatalf("the grandchild's word %#x", w)
	}
	if w := e.child.Word(rw + offWord); w != 1<<6 {
		t.Fatalf("the child's word %#x", w)
	}
	ss.Close()
	if w := readWord(t, gm, rw+offWord); w != 0 {
		t.Fatalf("the grandchild's word %#x after disable", w)
	}
	// The child goes; the grandchild's copy holds the event.
	e.f.Close()
	e.child.Kill()
	testutil.Wait(t, "the child's exit", func() bool { return e.cs.Stats().Exits == 1 })
	if e.event("callers_ff") == nil {
		t.Fatal("the event went with the child, though the grandchild holds it")
	}
	unix.Kill(gpid, unix.SIGKILL)
	testutil.Wait(t, "the event to go with the grandchild", func() bool { return e.event("callers_ff") == nil })
}

// TestFollowExec: with Follow, an exec releases the process's enablers when
// the kernel tells of it, without a Get.
func TestFollowExec(t *testing.T) {
	e := newEnv(t)
	follow(t, e)
	c := e.get(e.child.Pid)
	e.register(c, 0, "callers_fe u32 a")
	e.f.Close()
	ss := e.s.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	ev := e.event("callers_fe")
	if err := ss.Attach(ev); err != nil {
		t.Fatal(err)
	}
	if ev.Status() != subsys.StatusPerf {
		t.Fatalf("status %#x", ev.Status())
	}
	if st := string(e.s.AppendStatus(nil)); !strings.Contains(st, "callers_fe # Used by perf") {
		t.Fatalf("user_events_status:\n%s", st)
	}
	e.child.Exec()
	testutil.Wait(t, "the exec to be seen", func() bool { return e.cs.Stats().Execs == 1 })
	ss.Detach(ev) // the session's reference was the last
	if e.event("callers_fe") != nil {
		t.Fatal("the exec'd process's enabler still holds the event")
	}
}

// TestFollowCloneVM: a CLONE_VM child shares its parent's Process.
func TestFollowCloneVM(t *testing.T) {
	e := newEnv(t)
	follow(t, e)
	c := e.get(e.child.Pid)
	e.register(c, 0, "callers_vm u32 a")
	vpid := e.child.Fork(true)
	testutil.Wait(t, "the clone to be seen", func() bool { return e.cs.Stats().Clones == 1 })
	v := e.get(vpid)
	if v.Process != c.Process || v.TGID != vpid {
		t.Fatalf("the CLONE_VM child: %+v", v)
	}
	// The parent exits; the address space lives on in the clone.
	e.f.Close()
	e.child.Kill()
	testutil.Wait(t, "the parent's exit", func() bool { return e.cs.Stats().Exits == 1 })
	if e.event("callers_vm") == nil {
		t.Fatal("the event went with the parent, though the clone shares its memory")
	}
	unix.Kill(vpid, unix.SIGKILL)
	testutil.Wait(t, "the event to go with the clone", func() bool { return e.event("callers_vm") == nil })
}

func TestClose(t *testing.T) {
	e := newEnv(t)
	c := e.get(e.child.Pid)
	e.register(c, 0, "callers_c u32 a")
	e.f.Close()
	e.cs.Close()
	if e.event("callers_c") != nil {
		t.Fatal("Close did not release")
	}
	if _, err := e.cs.Get(e.child.Pid); !errors.Is(err, callers.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if err := e.cs.Follow(); !errors.Is(err, callers.ErrClosed) && !errors.Is(err, unix.EPERM) {
		t.Errorf("Follow after Close: %v", err)
	}
}

// BenchmarkGet is the lookup every request of a known caller makes.
func BenchmarkGet(b *testing.B) {
	s := subsys.New(subsys.Options{})
	cs := callers.New(s)
	defer cs.Close()
	tid := unix.Gettid()
	if _, err := cs.Get(tid); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cs.Get(tid); err != nil {
			b.Fatal(err)
		}
	}
}
