package subsys

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
)

// Spec §2.1: DIAG_IOCSREG's checks in order. Each row breaks one rule — and
// every later rule too where that shows the precedence.
func TestRegisterErrno(t *testing.T) {
	good := abi.UserReg{Size: abi.UserRegSize, EnableBit: 0, EnableSize: 4, EnableAddr: check}
	withTail := func(r abi.UserReg, tail ...byte) []byte {
		b := r.Bytes()
		binary.NativeEndian.PutUint32(b, uint32(abi.UserRegSize+len(tail)))
		return append(b, tail...)
	}
	mod := func(fn func(*abi.UserReg)) []byte { r := good; fn(&r); return r.Bytes() }
	tests := []struct {
		name  string
		reg   []byte
		cmd   string
		fault bool
		cred  Cred
		errno unix.Errno
	}{
		{"size unreadable", []byte{1, 0}, "e", false, root, unix.EFAULT},
		{"size over a page", mod(func(r *abi.UserReg) { r.Size = 4097; r.Flags = 99 }), "e", false, root, unix.E2BIG},
		{"size under 28", mod(func(r *abi.UserReg) { r.Size = 27; r.Flags = 99 }), "e", false, root, unix.EINVAL},
		{"non-zero tail", withTail(good, 0, 0, 1), "e:bad", false, root, unix.E2BIG},
		{"zero tail", withTail(good, 0, 0, 0, 0), "e", false, root, 0},
		{"tail unreadable", withTail(good, 0, 0)[:abi.UserRegSize+1], "e", false, root, unix.EFAULT},
		{"struct unreadable", good.Bytes()[:20], "e", false, root, unix.EFAULT},
		{"flags 4", mod(func(r *abi.UserReg) { r.Flags = 4; r.EnableSize = 3 }), "e", false, root, unix.EINVAL},
		{"flags 0x8000", mod(func(r *abi.UserReg) { r.Flags = 0x8000 }), "e", false, root, unix.EINVAL},
		{"size 2", mod(func(r *abi.UserReg) { r.EnableSize = 2 }), "e", false, root, unix.EINVAL},
		{"misaligned", mod(func(r *abi.UserReg) { r.EnableAddr = check + 4; r.EnableSize = 8 }), "e", false, root, unix.EINVAL},
		{"bit 32 of 4", mod(func(r *abi.UserReg) { r.EnableBit = 32; r.EnableAddr = 1 << 60 }), "e", false, root, unix.EINVAL},
		{"kernel address", mod(func(r *abi.UserReg) { r.EnableAddr = 0xffff800000000000 }), "e", false, root, unix.EFAULT},
		{"top of user space", mod(func(r *abi.UserReg) { r.EnableAddr = UserAddrMax4Level; r.EnableSize = 8 }), "e", false, root, unix.ENOMEM},
		{"past the top of user space", mod(func(r *abi.UserReg) { r.EnableAddr = UserAddrMax4Level + 4 }), "e", false, root, unix.EFAULT},
		{"name unreadable", good.Bytes(), "e", true, root, unix.EFAULT},
		{"name 512 bytes", good.Bytes(), strings.Repeat("e", 512), false, root, unix.EINVAL},
		{"name 511 bytes", good.Bytes(), strings.Repeat("e", 511), false, root, 0},
		{"text flags", good.Bytes(), "e:f u32 a", false, root, unix.EINVAL},
		{"persist unprivileged", mod(func(r *abi.UserReg) { r.Flags = RegPersist }), "e:f", false, user, unix.EINVAL},
		{"persist unprivileged, good command", mod(func(r *abi.UserReg) { r.Flags = RegPersist }), "e bad", false, user, unix.EPERM},
		{"bad field", good.Bytes(), "e bad", false, root, unix.EINVAL},
		{"struct-size quirk", good.Bytes(), "e struct s a 4294967295", false, root, unix.EPERM},
		{"unwritable enable word", mod(func(r *abi.UserReg) { r.EnableAddr = 0x8000 }), "e u32 a", false, root, unix.ENOMEM},
	}
	for _, tt := range tests {
		e := newEnv(t)
		f := e.s.Open()
		_, err := f.Register(e.p, tt.cred, RegisterArgs{Reg: tt.reg, Name: tt.cmd, NameFault: tt.fault})
		wantErrno(t, tt.name, err, tt.errno)
		f.Close()
	}
}

func TestRegisterPrecedence(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	if _, err := e.reg(f, "e u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	// The address/bit clash comes before the name is read or parsed.
	_, err := f.Register(e.p, root, RegisterArgs{Reg: regArgs("", check, 0, 4, 0).Reg, NameFault: true})
	wantErrno(t, "clash before name fault", err, unix.EADDRINUSE)
	_, err = e.reg(f, "x:bad", 0, 0)
	wantErrno(t, "clash before parse", err, unix.EADDRINUSE)
	// Another event at the same word but another bit is fine; enable_size is
	// not part of the comparison, the raw address is.
	if _, err := f.Register(e.p, root, regArgs("e u32 a", check, 0, 8, 0)); err == nil {
		t.Error("size 8 at the same address and bit: want EADDRINUSE")
	}
	if _, err := f.Register(e.p, root, regArgs("e u32 a", check+4, 0, 4, 0)); err != nil {
		t.Errorf("the same physical bit through another raw address: %v", err)
	}
	// Same name, other fields: EADDRINUSE before the fields are parsed.
	_, err = e.reg(f, "e u64 a", 1, 0)
	wantErrno(t, "other fields", err, unix.EADDRINUSE)
	_, err = e.reg(f, "e u32  a", 2, 0)
	wantErrno(t, "lenient match of unparsable text", err, 0)
	// A multi-format request never sees the single-format event.
	if _, err := e.reg(f, "e u64 a", 3, RegMultiFormat); err != nil {
		t.Errorf("multi-format beside single-format: %v", err)
	}
	// EMFILE, and a failed multi-format registration uses a multi_id.
	e.s.SetMaxEvents(2)
	_, err = e.reg(f, "m u8 z", 4, RegMultiFormat)
	wantErrno(t, "user_events_max", err, unix.EMFILE)
	e.s.SetMaxEvents(DefaultMaxEvents)
	if _, err := e.reg(f, "m u8 z", 5, RegMultiFormat); err != nil {
		t.Fatal(err)
	}
	if e.s.Lookup("user_events_multi", "m.2") == nil {
		t.Errorf("multi_id not used up by the failed registration: %v", e.read(FileStatus))
	}
	// Reuse: the existing event's flags win.
	if _, err := e.reg(f, "e u32 a", 6, RegPersist); err != nil {
		t.Fatal(err)
	}
	if e.s.Lookup("user_events", "e").Persistent() {
		t.Error("PERSIST request turned an existing event persistent")
	}
}

func TestRegisterFailedWriteKeepsIndex(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	_, err := f.Register(e.p, root, regArgs("e u32 a", 0x8000, 0, 4, 0))
	wantErrno(t, "unwritable", err, unix.ENOMEM)
	if len(f.Events()) != 1 || !e.exists("e") {
		t.Fatal("the event should stay in the file's array until close")
	}
	f.Close()
	if e.exists("e") {
		t.Fatal("event outlived the file")
	}
}

// Spec §3.1.
func TestUnregisterErrno(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	if _, err := e.reg(f, "e u32 a", 5, 0); err != nil {
		t.Fatal(err)
	}
	u := abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: 5, DisableAddr: check}
	mod := func(fn func(*abi.UserUnreg)) []byte { x := u; fn(&x); return x.Bytes() }
	tail := func(b []byte, extra ...byte) []byte {
		binary.NativeEndian.PutUint32(b, uint32(len(b)+len(extra)))
		return append(b, extra...)
	}
	tests := []struct {
		name  string
		arg   []byte
		errno unix.Errno
	}{
		{"size unreadable", []byte{1}, unix.EFAULT},
		{"size over a page", mod(func(x *abi.UserUnreg) { x.Size = 4097 }), unix.E2BIG},
		{"size under 16", mod(func(x *abi.UserUnreg) { x.Size = 15 }), unix.EINVAL},
		{"reserved", mod(func(x *abi.UserUnreg) { x.Reserved = 1 }), unix.EINVAL},
		{"reserved2", mod(func(x *abi.UserUnreg) { x.Reserved2 = 1 }), unix.EINVAL},
		// The copy stopped at the non-zero tail: the zeroed stack copy passes
		// the reserved check and E2BIG comes out.
		{"reserved and non-zero tail", tail(mod(func(x *abi.UserUnreg) { x.Reserved = 1 }), 7), unix.E2BIG},
		{"other bit", mod(func(x *abi.UserUnreg) { x.DisableBit = 6 }), unix.ENOENT},
		{"other address", mod(func(x *abi.UserUnreg) { x.DisableAddr = check + 8 }), unix.ENOENT},
		{"bit not range-checked", mod(func(x *abi.UserUnreg) { x.DisableBit = 200 }), unix.ENOENT},
		{"ok", u.Bytes(), 0},
		{"again", u.Bytes(), unix.ENOENT},
	}
	for _, tt := range tests {
		wantErrno(t, tt.name, f.Unregister(e.p, tt.arg), tt.errno)
	}
	// The clear that fails after the enabler went is EFAULT.
	if _, err := e.reg(f, "e u32 a", 5, 0); err != nil {
		t.Fatal(err)
	}
	e.mem.readOnly.Store(true)
	wantErrno(t, "unwritable at unregister", f.Unregister(e.p, u.Bytes()), unix.EFAULT)
	e.mem.readOnly.Store(false)
	wantErrno(t, "enabler already gone", f.Unregister(e.p, u.Bytes()), unix.ENOENT)
}

// Spec §3.2.
func TestDeleteErrno(t *testing.T) {
	e := newEnv(t)
	wantErrno(t, "none", e.s.Delete("p", root), unix.ENOENT)
	wantErrno(t, "512 bytes", e.s.Delete(strings.Repeat("p", 512), root), unix.EINVAL)
	if err := e.write(FileDynamicEvents, "u:p u32 a\n"); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "fields are not matched", e.s.Delete("p u32 a", root), unix.ENOENT)
	wantErrno(t, "unprivileged", e.s.Delete("p", user), unix.EPERM)
	e.enable("p", true)
	wantErrno(t, "enabled", e.s.Delete("p", root), unix.EBUSY)
	e.enable("p", false)
	f := e.s.Open()
	if _, err := e.reg(f, "p u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "held by an fd and an enabler", e.s.Delete("p", root), unix.EBUSY)
	e.unreg(0)
	wantErrno(t, "held by an fd", e.s.Delete("p", root), unix.EBUSY)
	f.Close()
	wantErrno(t, "free", e.s.Delete("p", root), 0)
	// Non-persistent events are always busy.
	f = e.s.Open()
	defer f.Close()
	e.reg(f, "q", 0, 0)
	e.unreg(0)
	wantErrno(t, "non-persistent", e.s.Delete("q", root), unix.EBUSY)
	// One name deletes the single-format event and every multi-format version.
	for i, args := range []string{" u8 a", " u16 a"} {
		g := e.s.Open()
		if _, err := e.reg(g, "r"+args, uint8(10+i), RegMultiFormat|RegPersist); err != nil {
			t.Fatal(err)
		}
		g.Close()
		e.unreg(uint8(10 + i))
	}
	e.write(FileDynamicEvents, "u:r u32 a")
	wantErrno(t, "all versions", e.s.Delete("r", root), 0)
	if got := e.read(FileStatus); strings.Contains(got, "r") {
		t.Errorf("left: %s", got)
	}
}

// Spec §5.2.
func TestWriteErrno(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	g := e.s.Open()
	defer g.Close()
	_, err := g.Writev(w0, le32(0))
	wantErrno(t, "fd with no events", err, unix.ENOENT)
	idx, _ := e.reg(f, "e u32 a; __data_loc char[] s", 0, 0)
	tests := []struct {
		name  string
		iov   [][]byte
		errno unix.Errno
	}{
		{"3 bytes", [][]byte{{0, 0, 0}}, unix.EFAULT},
		{"index split over iovecs, disabled", [][]byte{{0, 0}, {0, 0}, le32(1), le32(0)}, unix.EBADF},
		{"negative index before range", [][]byte{le32(0x80000000)}, unix.EINVAL},
		{"index out of range before size", [][]byte{le32(1)}, unix.ENOENT},
		{"short payload before disabled", [][]byte{le32(idx), le32(1)}, unix.EINVAL},
		{"disabled before validation", [][]byte{le32(idx), le32(1), le32(0xffff0000)}, unix.EBADF},
	}
	for _, tt := range tests {
		_, err := f.Writev(w0, tt.iov...)
		wantErrno(t, tt.name, err, tt.errno)
	}
	if n, err := f.Writev(w0, nil, []byte{}); n != 0 || err != nil {
		t.Errorf("empty writev: %d, %v; want 0, nil", n, err)
	}
	_, err = f.Write(w0, nil, 0)
	wantErrno(t, "empty write", err, unix.EFAULT)
	_, err = f.Write(w0, le32(idx), 4)
	wantErrno(t, "pwrite at 4", err, unix.EFAULT)
	e.enable("e", true)
	_, err = f.Writev(w0, le32(idx), le32(1), le32(0xffff0000))
	wantErrno(t, "bad loc while enabled", err, unix.EFAULT)
	if n, err := f.Writev(w0, le32(idx), le32(1), le32(3<<16|16), []byte("hi\x00extra")); n != 20 || err != nil {
		t.Errorf("write: %d, %v; want the full 20 bytes", n, err)
	}
	e.enable("e", false)
}

// Spec §6.3 and §6.4, through the dynamic_events file.
func TestDynamicEventsErrno(t *testing.T) {
	e := newEnv(t)
	w := func(text string, cred Cred) error {
		return e.s.FS().WriteFile(FileDynamicEvents, []byte(text), os.O_APPEND, cred)
	}
	tests := []struct {
		text  string
		cred  Cred
		errno unix.Errno
	}{
		{"", root, 0},
		{"   \n\n# comment only\n", root, 0},
		{"u:a u32 x", user, unix.EPERM},
		{"u:a:f u32 x", user, unix.EINVAL}, // flags before the privilege
		{"u:a u32 x # trailing comment leaves a space", root, unix.EINVAL},
		{" u:a u32 x", root, unix.EINVAL},
		{"x:foo", root, unix.EINVAL},
		{"u:a u32 x", root, 0},
		{"u:a u32 x", root, 0}, // exists, same fields: nothing changes
		{"u:a u32 x # now it matches", root, 0},
		{"u:a u64 x", root, unix.EADDRINUSE},
		{"u:b u8 y\nu:c u8 z\nbad\nu:d u8 w\n", root, unix.EINVAL},
		{"u:e u8 q\x00u:f u8 r\n", root, unix.EINVAL},
		{"u:" + strings.Repeat("g", 4093), root, 0},
		{"u:" + strings.Repeat("h", 4094), root, unix.EINVAL},
		{"!u:a", root, unix.ENOENT},
		{"!u:a u32 x", user, unix.EPERM},
		{"!u:zz", root, unix.ENOENT},
		{"!u:", root, unix.EINVAL},
		{"-a u32 x", root, unix.EINVAL},
		{"!u:other/a u32 x", root, unix.ENOENT},
		{"-:user_events/a u32 x", root, 0},
	}
	for _, tt := range tests {
		wantErrno(t, tt.text[:min(len(tt.text), 40)], w(tt.text, tt.cred), tt.errno)
	}
	want := "u:b u8 y\nu:c u8 z\nu:" + strings.Repeat("g", 4093) + "\n"
	if got := e.read(FileDynamicEvents); got != want {
		t.Errorf("dynamic_events:\n%.200s\nwant:\n%.200s", got, want)
	}
	// O_TRUNC: EBUSY while any event is in use, else everything goes.
	f := e.s.Open()
	e.reg(f, "busy", 0, 0)
	wantErrno(t, "O_TRUNC busy", e.s.FS().WriteFile(FileDynamicEvents, nil, os.O_TRUNC, root), unix.EBUSY)
	f.Close()
	e.unreg(0)
	wantErrno(t, "O_TRUNC", e.s.FS().WriteFile(FileDynamicEvents, nil, os.O_TRUNC, root), 0)
	if got := e.read(FileStatus); got != "\nActive: 0\nBusy: 0\n" {
		t.Errorf("after O_TRUNC:\n%s", got)
	}
}

func TestStatusText(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"test", "__test_event", "__abi_event", "e", "x"} {
		if err := e.write(FileDynamicEvents, "u:"+name); err != nil {
			t.Fatal(err)
		}
	}
	e.enable("test", true)
	ss := e.s.NewSession(SessionOptions{})
	ss.Attach(e.s.Lookup("user_events", "test"))
	other := e.s.NewSession(SessionOptions{Other: true})
	other.Attach(e.s.Lookup("user_events", "x"))
	want := "__test_event\nx # Used by other\ntest # Used by ftrace perf\n__abi_event\ne\n\nActive: 5\nBusy: 2\n"
	if got := e.read(FileStatus); got != want {
		t.Errorf("status:\n%s\nwant:\n%s", got, want)
	}
	if got := e.read(FileAvailableEvents); got != "user_events:x\nuser_events:e\nuser_events:__abi_event\nuser_events:__test_event\nuser_events:test\n" {
		t.Errorf("available_events:\n%s", got)
	}
	if got := e.read(FileSetEvent); got != "user_events:test\n" {
		t.Errorf("set_event:\n%s", got)
	}
	if got := e.read("events/user_events/enable"); got != "X\n" {
		t.Errorf("system enable %q", got)
	}
}

// A write whose buffer faults part-way, as a FUSE server sees it: only the
// bytes before the fault arrive. Linux's order (user_events_write_core):
// index first, then size and state against the full length, then the copy.
func TestWriteFaulted(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	idx, _ := e.reg(f, "e u32 a; u32 b", 0, 0)
	whole := append(append(le32(idx), le32(1)...), le32(2)...)
	tests := []struct {
		name     string
		readable []byte
		total    int
		enabled  bool
		errno    unix.Errno
	}{
		{"fault within the index", whole[:2], 12, true, unix.EFAULT},
		{"nothing readable", nil, 12, false, unix.EFAULT},
		{"bad index before the fault", le32(7), 12, true, unix.ENOENT},
		{"negative index", le32(0x80000000), 12, true, unix.EINVAL},
		{"too short in all before the fault", whole[:4], 7, true, unix.EINVAL},
		{"disabled: EBADF, the payload is never copied", whole[:6], 12, false, unix.EBADF},
		{"enabled: the copy faults", whole[:6], 12, true, unix.EFAULT},
		{"all readable is a write", whole, 12, true, 0},
	}
	for _, tt := range tests {
		e.enable("e", tt.enabled)
		before, _ := e.s.Lookup("user_events", "e").Counts()
		n, err := f.WriteFaulted(w0, tt.readable, tt.total)
		wantErrno(t, tt.name, err, tt.errno)
		after, _ := e.s.Lookup("user_events", "e").Counts()
		if tt.errno != 0 && (n != 0 || after != before) {
			t.Errorf("%s: wrote %d bytes, %d records; a faulted write writes nothing", tt.name, n, after-before)
		}
		if tt.errno == 0 && (n != 12 || after != before+1) {
			t.Errorf("%s: %d bytes, %d records; want 12 bytes and one record", tt.name, n, after-before)
		}
	}
}
