package tracefilter

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

const testEvent = "__filt u32 idx;u8 a;s32 b;u64 c;char[16] s;__rel_loc char[] r;__data_loc char[] d;s8 e;u16 f;s64 g"

func testRecord(t testing.TB, ev *eventdef.Event, a uint8, b int32, s, r string) []byte {
	t.Helper()
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	enc.Uint(1)
	enc.Uint(uint64(a))
	enc.Int(int64(b))
	enc.Uint(42)
	enc.String(s)
	enc.String(r)
	enc.String("/api/x")
	enc.Int(-1)
	enc.Uint(7)
	enc.Int(-7)
	p, err := enc.Payload()
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(p))
	binary.NativeEndian.PutUint32(rec[4:], 1234)
	return append(rec, p...)
}

func mustEvent(t testing.TB) *eventdef.Event {
	ev, err := eventdef.Parse(testEvent)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestMatch(t *testing.T) {
	ev := mustEvent(t)
	rec := testRecord(t, ev, 5, -3, "hello", "/api/users")
	env := &Env{CPU: 1, Comm: "myprog"}
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{"a == 5", true},
		{"a != 5", false},
		{"b < 0 && a >= 5", true},
		{"b > 0 || a == 4", false},
		{"!(b > 0 || a == 4)", true},
		{"s == \"hello\"", true},
		{"s ~ \"hel*\"", true},
		{"s ~ \"*llo\"", false}, // char[16]: the kernel's end match looks at byte 14 back
		{"r ~ \"*users\"", true},
		{"r ~ \"/api/*\" && d ~ \"*/x\"", true},
		{"s ~ \"h[a-f]llo\"", true},
		{"s ~ \"!h*\"", false},
		{"common_pid == 1234", true},
		{"CPU == 1 && comm == \"myprog\"", true},
		{"CPU & CPUS{0}", false},
		{"a & 4", true},
		{"c == 0x2a && e == -1 && f == 07 && g == -7", true},
		{"stacktrace != 0", false},
	} {
		f, err := Compile(ev, c.filter, Options{NrCPUs: 2})
		if err != nil {
			t.Errorf("%q: %v", c.filter, err)
			continue
		}
		if got := f.Match(rec, env); got != c.want {
			t.Errorf("%q: Match = %v, want %v", c.filter, got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	ev := mustEvent(t)
	for _, c := range []struct {
		filter string
		errno  unix.Errno
		code   Code
		pos    int
	}{
		{"x == 1", unix.EINVAL, ErrFieldNotFound, 2},
		{"a == 1)", unix.EPERM, ErrTooManyClose, 6},
		{"(a == 1", unix.ENOENT, ErrTooManyOpen, 0},
		{"s == \"x", unix.ESRCH, ErrMissingQuote, 5},
		{"a == 1 &&", unix.EINVAL, ErrInvalidFilter, 9},
		{"== 1", unix.EPERM, ErrNone, 0},
	} {
		_, err := Compile(ev, c.filter, Options{NrCPUs: 2})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: %v, want an *Error", c.filter, err)
			continue
		}
		if !errors.Is(err, c.errno) || e.Code != c.code || e.Pos != c.pos {
			t.Errorf("%q: errno %v code %v pos %d, want %v %v %d", c.filter, e.Errno, e.Code, e.Pos, c.errno, c.code, c.pos)
		}
	}
}

func TestMatchNoAllocs(t *testing.T) {
	ev := mustEvent(t)
	rec := testRecord(t, ev, 5, -3, "hello", "/api/users")
	env := &Env{CPU: 1, Comm: "myprog"}
	f, err := Compile(ev, `a == 5 && b < 100 && (r ~ "/api/*" || comm == "x") && CPU & CPUS{0-1}`, Options{NrCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { f.Match(rec, env) }); n != 0 {
		t.Fatalf("Match allocates %v times", n)
	}
}

// BenchmarkMatch3 is the target: a passing record through a
// 3-predicate filter, at most 30 ns.
func BenchmarkMatch3(b *testing.B) {
	ev := mustEvent(b)
	rec := testRecord(b, ev, 5, -3, "hello", "/api/users")
	env := &Env{CPU: 1, Comm: "myprog"}
	f, err := Compile(ev, `a == 5 && b < 100 && r ~ "/api/*"`, Options{NrCPUs: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(rec, env) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	ev := mustEvent(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(ev, `a == 5 && b < 100 && r ~ "/api/*"`, Options{NrCPUs: 2}); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCompile checks that any text either compiles to a filter that
// evaluates any record without panicking, or fails with an *Error whose
// errno is one the kernel returns and whose text the filter file can show.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"a == 1", "a == 1 && b < -3 || s ~ \"ab*\"", "(a == 1", "a == 1)", "!(a == 1 || !(b == 2))",
		"s ~ \"[a-\"", "s ~ \"*\\\\\"", "CPU & CPUS{0-1:1/2}", "c & CPUS{N}", "comm ~ \"x?\"",
		"a == 0x", "g == -9223372036854775808", "((a == 1) && (b == 2)) || (c == 3)", "r == \"\"", "()", "",
		"a == CPUS{\"} && ((b == 1", "d ~ \"/api/*/x\"", "a.function == 1", "0", "stacktrace == 1",
	} {
		f.Add(s, []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789"))
	}
	ev, err := eventdef.Parse(testEvent)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, filter string, rec []byte) {
		flt, err := Compile(ev, filter, Options{NrCPUs: 4})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%q: %v is not an *Error", filter, err)
			}
			switch e.Errno {
			case unix.EINVAL, unix.EPERM, unix.ENOENT, unix.ESRCH:
			default:
				t.Fatalf("%q: errno %v", filter, e.Errno)
			}
			_ = e.errorText()
			_ = e.AppendErrorLog(nil, 0)
			return
		}
		flt.Match(rec, &Env{CPU: 3, Comm: filter})
		flt.Match(nil, &Env{})
		flt.Match(rec, nil)
	})
}
