package tracefmt

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

func mustRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Kernel tracepoints, as a Linux host printed their format files.
func TestParseKernelFormats(t *testing.T) {
	f, err := Parse(mustRead(t, "sched_switch.format"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "sched_switch" || f.ID != 372 || len(f.Common) != 4 || len(f.Fields) != 7 {
		t.Fatalf("got name %q id %d, %d common and %d fields", f.Name, f.ID, len(f.Common), len(f.Fields))
	}
	want := []Field{
		{Type: "char[16]", Name: "prev_comm", Offset: 8, Size: 16, Kind: String},
		{Type: "pid_t", Name: "prev_pid", Offset: 24, Size: 4, Signed: true, Kind: Int},
		{Type: "int", Name: "prev_prio", Offset: 28, Size: 4, Signed: true, Kind: Int},
		{Type: "long", Name: "prev_state", Offset: 32, Size: 8, Signed: true, Kind: Int},
		{Type: "char[16]", Name: "next_comm", Offset: 40, Size: 16, Kind: String},
		{Type: "pid_t", Name: "next_pid", Offset: 56, Size: 4, Signed: true, Kind: Int},
		{Type: "int", Name: "next_prio", Offset: 60, Size: 4, Signed: true, Kind: Int},
	}
	if d := cmp.Diff(want, f.Fields); d != "" {
		t.Error(d)
	}
	if c := f.Field("common_pid"); c == nil || c.Offset != 4 || !c.Signed {
		t.Errorf("common_pid = %+v", c)
	}
	if !strings.HasPrefix(f.PrintFmt, `"prev_comm=%s`) || !strings.HasSuffix(f.PrintFmt, "REC->next_prio") {
		t.Errorf("print fmt = %q", f.PrintFmt)
	}

	f, err = Parse(mustRead(t, "sys_enter_openat.format"))
	if err != nil {
		t.Fatal(err)
	}
	if got := *f.Field("filename"); got != (Field{Type: "const char *", Name: "filename", Offset: 24, Size: 8, Kind: Int}) {
		t.Errorf("filename = %+v", got)
	}
	f, err = Parse(mustRead(t, "block_io_done.format"))
	if err != nil {
		t.Fatal(err)
	}
	if got := *f.Field("cmd"); got != (Field{Type: "__data_loc char[]", Name: "cmd", Offset: 60, Size: 4, Kind: String, Loc: DataLoc}) {
		t.Errorf("cmd = %+v", got)
	}
}

// Every kind of user event field, with the format text eventdef prints
// byte for byte as the kernel does, decoded from a record eventdef encodes.
func TestDecodeUserEvent(t *testing.T) {
	ev, err := eventdef.Parse("test u8 a; s16 b; s32 c; u64 d; char[8] e; __data_loc char[] f; __rel_loc char[] g; __rel_loc u8[] h; struct s i 3")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse([]byte(ev.Format("test", 1234)))
	if err != nil {
		t.Fatal(err)
	}
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	enc.Uint(200)
	enc.Int(-2)
	enc.Int(-3)
	enc.Uint(1 << 40)
	enc.String("eight!")
	enc.String("data")
	enc.String("rel")
	enc.Bytes([]byte{1, 2, 3})
	enc.Bytes([]byte{9, 8, 7})
	payload, err := enc.Payload()
	if err != nil {
		t.Fatal(err)
	}
	raw := binary.NativeEndian.AppendUint16(nil, 1234)
	raw = append(raw, 0, 0)
	raw = binary.NativeEndian.AppendUint32(raw, 77)
	raw = append(raw, payload...)

	type got struct {
		Name string
		Kind Kind
		Int  int64
		Text string
	}
	var out []got
	for _, v := range f.Decode(nil, raw) {
		if v.Overflow {
			t.Fatalf("%s overflows", v.Field.Name)
		}
		g := got{Name: v.Field.Name, Kind: v.Field.Kind}
		switch v.Field.Kind {
		case Int:
			g.Int = v.Int()
		case String:
			g.Text = string(v.Text())
		case Bytes:
			g.Text = string(v.Data)
		}
		out = append(out, g)
	}
	want := []got{
		{"a", Int, 200, ""}, {"b", Int, -2, ""}, {"c", Int, -3, ""}, {"d", Int, 1 << 40, ""},
		{"e", String, 0, "eight!"}, {"f", String, 0, "data"}, {"g", String, 0, "rel"},
		{"h", Bytes, 0, "\x01\x02\x03"}, {"i", Bytes, 0, "\x09\x08\x07"},
	}
	if d := cmp.Diff(want, out); d != "" {
		t.Error(d)
	}
	if v := f.Field("common_pid").Value(raw); v.Int() != 77 {
		t.Errorf("common_pid = %d", v.Int())
	}
	// A record cut short marks what it no longer holds.
	vals := f.Decode(nil, raw[:20])
	if vals[2].Overflow || !vals[3].Overflow {
		t.Errorf("short record: c overflow %v, d overflow %v", vals[2].Overflow, vals[3].Overflow)
	}
}

func TestParseErrors(t *testing.T) {
	for _, text := range []string{
		"",
		"ID: 5\nformat:\n",
		"name: x\nformat:\n",
		"name: x\nID: -1\n",
		"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:8;\n",
		"name: x\nID: 1\nformat:\n\tfield:a;\toffset:8;\tsize:4;\tsigned:0;\n",
		"name: x\nID: 1\nformat:\n\tfield:int a;\toffset:x;\tsize:4;\tsigned:0;\n",
		"name: x\nID: 1\nformat:\n\tfield:__data_loc char[] a;\toffset:8;\tsize:2;\tsigned:0;\n",
		"name: x\nID: 1\nwhat\n",
	} {
		if _, err := Parse([]byte(text)); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Parse(%q) = %v, want EINVAL", text, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"sched_switch.format", "sys_enter_openat.format", "block_io_done.format"} {
		f.Add(mustRead(f, name), []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	}
	f.Fuzz(func(t *testing.T, text, raw []byte) {
		fm, err := Parse(text)
		if err != nil {
			return
		}
		for _, v := range fm.Decode(nil, raw) {
			if v.Overflow {
				continue
			}
			_, _ = v.Int(), v.Text()
			if v.Field.Loc == Inline && len(v.Data) != v.Field.Size {
				t.Fatalf("%s: %d bytes, size %d", v.Field.Name, len(v.Data), v.Field.Size)
			}
		}
	})
}
