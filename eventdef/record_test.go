package eventdef

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// record returns the header (zeroed) followed by payload.
func record(payload []byte) []byte { return append(make([]byte, HeaderSize), payload...) }

func le32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func dynLoc(off, size uint32) uint32 { return size<<16 | off }

func TestValidateSelftest(t *testing.T) {
	// ftrace_test write_validator: "__rel_loc char[] data", data "Test\0".
	ev := mustParse(t, "__test_event __rel_loc char[] data")
	if err := ev.CheckSize(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("empty payload: %v, want EINVAL", err)
	}
	data := []byte("Test\x00")
	tests := []struct {
		loc   uint32
		data  []byte
		errno unix.Errno
	}{
		{dynLoc(0, 5), data, 0},
		{dynLoc(1024, 5), data, unix.EFAULT},
		{dynLoc(1, 5), data, unix.EFAULT},
		{dynLoc(0, 5+1024), data, unix.EFAULT},
		{dynLoc(0, 6), data, unix.EFAULT},
		{dynLoc(0, 5), []byte("AAAAA"), unix.EFAULT}, // not NUL-terminated
		{dynLoc(0, 0), nil, 0},                       // size 0: the loc's top byte is checked, and it is 0
	}
	for _, tt := range tests {
		rec := record(append(le32(tt.loc), tt.data...))
		err := ev.Validate(rec)
		if tt.errno == 0 && err != nil || tt.errno != 0 && !errors.Is(err, tt.errno) {
			t.Errorf("loc %#x data %q: %v, want errno %d", tt.loc, tt.data, err, tt.errno)
		}
	}
}

func TestValidateDataLoc(t *testing.T) {
	ev := mustParse(t, "x u32 a; __data_loc char[] s; __data_loc u8[] b")
	// __data_loc offsets count from the record start: payload offset + 8.
	payload := append(le32(7), le32(dynLoc(8+12, 3))...)
	payload = append(payload, le32(dynLoc(8+15, 2))...)
	payload = append(payload, 'h', 'i', 0, 0xab, 0xcd)
	rec := record(payload)
	if err := ev.Validate(rec); err != nil {
		t.Fatalf("valid record: %v", err)
	}
	if got, want := string(ev.AppendTrace(nil, "x", rec)), "x: a=0x7 (7) s=hi b=ab,cd"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}
	// Payload-relative offsets (a common mistake) point 8 bytes early: the
	// string then ends on 'h', not NUL.
	binary.NativeEndian.PutUint32(rec[12:], dynLoc(12, 3))
	if err := ev.Validate(rec); !errors.Is(err, unix.EFAULT) {
		t.Errorf("payload-relative offset: %v, want EFAULT", err)
	}
	// No lower bound: a loc may point into the header (byte 2, flags, is 0).
	binary.NativeEndian.PutUint32(rec[12:], dynLoc(0, 3))
	if err := ev.Validate(rec); err != nil {
		t.Errorf("loc into the header: %v, want success", err)
	}
	// Non-char data needs no NUL.
	binary.NativeEndian.PutUint32(rec[12:], dynLoc(8+12, 3))
	binary.NativeEndian.PutUint32(rec[16:], dynLoc(8+15, 3))
	if err := ev.Validate(rec); !errors.Is(err, unix.EFAULT) {
		t.Errorf("u8[] past the end: %v, want EFAULT", err)
	}
}

func TestTraceSpecExample(t *testing.T) {
	// Spec §9: the trace line the reference kernel printed for one write.
	ev := mustParse(t, "__t u8 a; s16 b; u32 c; s64 d; char[6] e; __rel_loc char[] f; __data_loc char[] g; struct s h 3; char i")
	var enc Encoder
	enc.Reset(ev, nil)
	enc.Uint(65)
	enc.Int(-2)
	enc.Uint(0xdeadbeef)
	enc.Int(-5)
	enc.String("hello")
	enc.String("abc")
	enc.String("xy")
	enc.Bytes([]byte{1, 2, 3})
	enc.Uint(7)
	payload, err := enc.Payload()
	if err != nil {
		t.Fatal(err)
	}
	if len(payload) != 40 {
		t.Errorf("payload %d bytes, want 40 (the kernel took a 44-byte write)", len(payload))
	}
	rec := record(payload)
	if err := ev.Validate(rec); err != nil {
		t.Fatal(err)
	}
	want := `__t: a='A'(65) b=0xfffe (65534) c=0xdeadbeef (-559038737) d=0xfffffffffffffffb (-5) e=hello f=abc g=xy h=<INVALID-SIZE> i=(7)`
	if got := string(ev.AppendTrace(nil, "__t", rec)); got != want {
		t.Errorf("trace:\n got %s\nwant %s", got, want)
	}
	if err := ev.CheckSize(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("index-only write to min_size 36: %v, want EINVAL", err)
	}

	vals := ev.Decode(nil, rec)
	if vals[0].Uint() != 65 || vals[1].Int() != -2 || vals[2].Uint() != 0xdeadbeef || vals[3].Int() != -5 ||
		string(vals[4].Text()) != "hello" || string(vals[5].Text()) != "abc" || string(vals[6].Text()) != "xy" ||
		string(vals[7].Data) != "\x01\x02\x03" || vals[8].Int() != 7 {
		t.Errorf("decoded %+v", vals)
	}
}

func TestTraceEdgeCases(t *testing.T) {
	tests := []struct {
		cmd     string
		payload []byte
		want    string
	}{
		{"e", nil, "e:No fields found"},
		{"e u8 a", []byte{0}, "e: a=(0)"},
		{"e u8 a", []byte{'\''}, "e: a='''(39)"},
		{"e u8 a", []byte{0x80}, "e: a=(128)"},
		{"e u8 a", []byte{0xe9}, "e: a='\xe9'(233)"},
		{"e s16 a", []byte{0xff, 0x7f}, "e: a=0x7fff (32767)"},
		{"e u32 a", []byte{0, 0, 0, 0x80}, "e: a=0x80000000 (-2147483648)"},
		{"e u64 a", []byte{0, 0, 0, 0, 0, 0, 0, 0x80}, "e: a=0x8000000000000000 (-9223372036854775808)"},
		{"e char[4] a", []byte("ab\x00c"), "e: a=ab"},
		{"e char[4] a", []byte("abcd"), "e: a=abcd"},
		{"e struct s a 16", make([]byte, 16), "e: a=<INVALID-SIZE>"},
		{"e struct s a 2", []byte{1, 2}, "e: a=0x201 (513)"},
		{"e __data_loc char[] a", le32(dynLoc(100, 2)), "e: a=<OVERFLOW>"},
		{"e __data_loc cpumask_t a", le32(0), "e: a=<INVALID-TYPE>"},
		{"e u32 a; u32 b", le32(1), "e: a=0x1 (1) b=<OVERFLOW>"},
	}
	for _, tt := range tests {
		ev := mustParse(t, tt.cmd)
		if got := string(ev.AppendTrace(nil, "e", record(tt.payload))); got != tt.want {
			t.Errorf("%q %x: %q, want %q", tt.cmd, tt.payload, got, tt.want)
		}
	}
}

func TestEncoder(t *testing.T) {
	ev := mustParse(t, "e u8 a; s16 b; char[3] c; __rel_loc char[] r; __data_loc u8[] d; struct s x 2")
	var enc Encoder
	enc.Reset(ev, nil)
	enc.Int(-1)
	enc.Int(-300)
	enc.String("ab")
	enc.String("rel")
	enc.Bytes([]byte{9, 8})
	enc.Bytes([]byte{1, 2})
	p, err := enc.Payload()
	if err != nil {
		t.Fatal(err)
	}
	rec := record(p)
	if err := ev.Validate(rec); err != nil {
		t.Fatal(err)
	}
	if got, want := string(ev.AppendTrace(nil, "e", rec)), "e: a='\xff'(255) b=0xfed4 (65236) c=ab r=rel d=09,08 x=0x201 (513)"; got != want {
		t.Errorf("trace %q, want %q", got, want)
	}

	errCases := []struct {
		name string
		set  func(*Encoder)
	}{
		{"too big for u8", func(e *Encoder) { e.Uint(256) }},
		{"too small for u8", func(e *Encoder) { e.Int(-129) }},
		{"string on integer", func(e *Encoder) { e.String("x") }},
		{"missing fields", func(e *Encoder) { e.Int(1) }},
	}
	for _, c := range errCases {
		enc.Reset(ev, p[:0])
		c.set(&enc)
		if _, err := enc.Payload(); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", c.name, err)
		}
	}
	ev2 := mustParse(t, "e char[2] c; struct s x 2")
	enc.Reset(ev2, nil)
	enc.String("abc")
	if _, err := enc.Payload(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("char[2] with 3 bytes: %v", err)
	}
	enc.Reset(ev2, nil)
	enc.String("ab")
	enc.Bytes([]byte{1})
	if _, err := enc.Payload(); !errors.Is(err, unix.EINVAL) {
		t.Errorf("struct of 2 with 1 byte: %v", err)
	}
	ev3 := mustParse(t, "e __data_loc char[] s")
	enc.Reset(ev3, nil)
	enc.String(string(make([]byte, 70000)))
	if _, err := enc.Payload(); !errors.Is(err, unix.E2BIG) {
		t.Errorf("70000-byte string: %v, want E2BIG", err)
	}
	var zero Encoder
	zero.Uint(1)
	if _, err := zero.Payload(); err == nil {
		t.Error("zero Encoder without Reset accepted a value")
	}
}
