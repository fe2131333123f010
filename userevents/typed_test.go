package userevents_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

type httpStatus uint16 // a named type, as programs have

// TestTypedWrite writes typed events on every backend and decodes the
// records back with eventdef: each field holds the value written, and the
// record passes the kernel's checks (eventdef's Validate).
func TestTypedWrite(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		f := open(t, b.opts)
		name := uniq("typed")
		cmd := name + " u32 status; __rel_loc char[] path; s64 delta; char[8] tag; __data_loc char[] host; u8 ok"
		ev, err := userevents.Define6[httpStatus, string, int, []byte, string, bool](f, cmd)
		if err != nil {
			t.Fatal(err)
		}
		defer ev.Close()

		// Disabled: nothing written, no error.
		if err := ev.Write(1, "/nothing", -1, nil, "", false); err != nil {
			t.Fatalf("disabled Write: %v", err)
		}
		fs := openTracefs(t, b.opts)
		p := openPerf(t, b, eventdef.System, name)
		defer p.close()
		waitBit(t, ev.Event(), true)

		if err := ev.Write(200, "/index.html", -5, []byte("abc"), "example.org", true); err != nil {
			t.Fatal(err)
		}
		if err := ev.Write(65535, "", 1<<40, []byte("12345678"), "h", false); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		got := p.payloads(t)
		if len(got) != 2 {
			t.Fatalf("%d records, want 2: % x", len(got), got)
		}
		def := ev.Event().Def()
		want := [][6]string{
			{"200", "/index.html", "-5", "abc", "example.org", "1"},
			{"65535", "", "1099511627776", "12345678", "h", "0"},
		}
		for i, payload := range got {
			rec := append(make([]byte, eventdef.HeaderSize), payload...)
			if err := def.Validate(rec); err != nil {
				t.Errorf("record %d: %v", i, err)
			}
			vals := def.Decode(nil, rec)
			s := [6]string{
				itoa(int64(vals[0].Uint())), string(vals[1].Text()), itoa(vals[2].Int()),
				string(vals[3].Text()), string(vals[4].Text()), itoa(int64(vals[5].Uint())),
			}
			if s != want[i] {
				t.Errorf("record %d decodes as %q, want %q", i, s, want[i])
			}
		}
		_ = fs
	})
}

func itoa(v int64) string {
	if v < 0 {
		return "-" + itoa(-v)
	}
	if v < 10 {
		return string(rune('0' + v))
	}
	return itoa(v/10) + string(rune('0'+v%10))
}

// Define refuses Go types that do not fit their fields before registering
// anything, with EINVAL and words naming the field.
func TestDefineChecksTypes(t *testing.T) {
	o := inProcess()
	f := open(t, o)
	for _, c := range []struct {
		err  error
		want string
	}{
		{first(userevents.Define1[string](f, "t1 u32 a")), `field 1 "u32 a": a Go string does not set an integer field`},
		{first(userevents.Define1[uint64](f, "t2 u32 a")), `field 1 "u32 a": a Go uint64 (8 bytes) does not fit a 4-byte field`},
		{first(userevents.Define1[int](f, "t3 s32 a")), `a Go int (8 bytes) does not fit a 4-byte field`},
		{first(userevents.Define1[uint32](f, "t4 char[8] a")), `field 1 "char[8] a": a Go uint32 does not set a char[8] field: use a string or a []byte`},
		{first(userevents.Define2[uint32, string](f, "t5 u32 a")), `Define2 takes 2 fields but the command has 1`},
		{first(userevents.Define1[uint32](f, "t6 u32 a; u32 b")), `Define1 takes 1 fields but the command has 2`},
	} {
		if !errors.Is(c.err, unix.EINVAL) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v, want EINVAL saying %q", c.err, c.want)
		}
	}
	// Nothing was registered.
	fs := openTracefs(t, o)
	if dyn, _ := fs.ReadFile("dynamic_events"); len(dyn) != 0 {
		t.Errorf("dynamic_events after refused Defines:\n%s", dyn)
	}
	// A command the kernel refuses: the kernel's error.
	if _, err := userevents.Define1[uint32](f, "t7 u32 a; char[0] b"); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "array length is 0") {
		t.Errorf("Define of a bad command: %v", err)
	}
	// Widening and named types are fine.
	if _, err := userevents.Define3[uint8, httpStatus, int32](f, "t8 u64 a; u16 b; s64 c"); err != nil {
		t.Error(err)
	}
}

// Values that do not fit at write time: EINVAL or E2BIG, and nothing written.
func TestTypedWriteErrors(t *testing.T) {
	o := inProcess()
	f := open(t, o)
	ev, err := userevents.Define2[string, []byte](f, "typed_err char[4] a; __rel_loc u8[] b")
	if err != nil {
		t.Fatal(err)
	}
	fs := openTracefs(t, o)
	setEnable(t, fs, "user_events", "typed_err", true)
	if err := ev.Write("12345", nil); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), `field 1 "a": 5 bytes do not fit char[4]`) {
		t.Errorf("too long for char[4]: %v", err)
	}
	if err := ev.Write("", make([]byte, 70000)); !errors.Is(err, unix.E2BIG) {
		t.Errorf("70000 bytes of loc data: %v", err)
	}
	if err := ev.Write("1234", []byte{1, 2, 3}); err != nil {
		t.Error(err)
	}
	tr, _ := fs.ReadFile("trace")
	if n := strings.Count(string(tr), "typed_err:"); n != 1 {
		t.Errorf("%d records in the trace, want 1:\n%s", n, tr)
	}
}

// A typed Write allocates nothing: enabled or not, on the in-process
// backend and on the daemon's ring.
func TestTypedWriteAllocs(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			f := open(t, b.opts)
			name := uniq("typed_allocs")
			ev, err := userevents.Define3[uint32, string, int64](f, name+" u32 status; __rel_loc char[] path; s64 dur")
			if err != nil {
				t.Fatal(err)
			}
			if n := testing.AllocsPerRun(100, func() { ev.Write(200, "/index.html", 1234) }); n != 0 {
				t.Errorf("disabled: %v allocs per Write", n)
			}
			p := openPerf(t, b, eventdef.System, name)
			defer p.close()
			waitBit(t, ev.Event(), true)
			typed := testing.AllocsPerRun(100, func() {
				if err := ev.Write(200, "/index.html", 1234); err != nil {
					t.Fatal(err)
				}
			})
			// 0 where the backend's own write path allocates nothing: in
			// process, and the daemon's ring. (A system call's iovecs on the
			// kernel and a message on the daemon's socket cost the backend an
			// allocation or two, whatever wrote the record.)
			if (b.name == "inprocess" || b.name == "daemon") && typed != 0 {
				t.Errorf("enabled: %v allocs per Write", typed)
			}
		})
	}
}

func first[T any](_ T, err error) error { return err }

func inProcess() *userevents.Options {
	return inprocess(subsys.New(subsys.Options{}))
}

// FuzzTypedWrite writes arbitrary values through a typed event and decodes
// the record back: every record passes the kernel's checks (Validate) and
// holds the values written, and what cannot be written is EINVAL or E2BIG,
// never a record.
func FuzzTypedWrite(f *testing.F) {
	f.Add(uint32(200), "/index.html", int64(-5), "abc", []byte{1, 2, 3})
	f.Add(uint32(0), "", int64(0), "", []byte(nil))
	f.Add(^uint32(0), "a\x00b", int64(-1<<63), "12345678", make([]byte, 600))
	f.Add(uint32(1), "x", int64(1), "123456789", []byte{0})
	sys := subsys.New(subsys.Options{})
	file, err := userevents.Open(inprocess(sys))
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	ev, err := userevents.Define5[uint32, string, int64, string, []byte](file, "fuzz_typed u32 a; __rel_loc char[] s; s64 d; char[8] c; __data_loc u8[] b")
	if err != nil {
		f.Fatal(err)
	}
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if err := ss.Attach(sys.Lookup("user_events", "fuzz_typed")); err != nil {
		f.Fatal(err)
	}
	def := ev.Event().Def()
	buf := make([]byte, 1<<20)
	f.Fuzz(func(t *testing.T, a uint32, s string, d int64, c string, b []byte) {
		err := ev.Write(a, s, d, c, b)
		done, cancel := context.WithCancel(context.Background())
		cancel()
		recs, _ := ss.Read(done, buf, nil)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.E2BIG) {
				t.Fatalf("Write: %v", err)
			}
			if len(recs) != 0 {
				t.Fatalf("Write failed (%v) but wrote %d records", err, len(recs))
			}
			if len(c) <= 8 && len(s)+len(b) < 0xfff0 {
				t.Fatalf("Write of values that fit: %v", err)
			}
			return
		}
		if len(recs) != 1 {
			t.Fatalf("%d records, want 1", len(recs))
		}
		rec := recs[0].Raw[:eventdef.RecordSize(def.MinSize+len(s)+1+len(b))]
		if err := def.Validate(rec); err != nil {
			t.Fatal(err)
		}
		v := def.Decode(nil, rec)
		wantS, _, _ := strings.Cut(s, "\x00")
		wantC, _, _ := strings.Cut(c, "\x00")
		if uint32(v[0].Uint()) != a || string(v[1].Text()) != wantS || v[2].Int() != d || string(v[3].Text()) != wantC || !bytes.Equal(v[4].Data, b) {
			t.Fatalf("decoded %d %q %d %q %x, wrote %d %q %d %q %x", v[0].Uint(), v[1].Text(), v[2].Int(), v[3].Text(), v[4].Data, a, s, d, c, b)
		}
	})
}
