package eventdef

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
)

func TestParseErrno(t *testing.T) {
	// Every line is a command as given to DIAG_IOCSREG and the errno Linux
	// 6.12 returns for it (0 for success). Sources: the kernel selftests
	// (dyn_test.c) and spec §1.
	tests := []struct {
		cmd   string
		errno unix.Errno
	}{
		// dyn_test basic_types, loc_types, size_types.
		{"__test_event u64 a", 0},
		{"__test_event u32 a", 0},
		{"__test_event u16 a", 0},
		{"__test_event u8 a", 0},
		{"__test_event char a", 0},
		{"__test_event unsigned char a", 0},
		{"__test_event int a", 0},
		{"__test_event unsigned int a", 0},
		{"__test_event short a", 0},
		{"__test_event unsigned short a", 0},
		{"__test_event char[20] a", 0},
		{"__test_event unsigned char[20] a", 0},
		{"__test_event char[0x14] a", 0},
		{"__test_event unsigned char[0x14] a", 0},
		{"__test_event char[aa] a", unix.EINVAL},
		{"__test_event char[9999] a", unix.EINVAL},
		{"__test_event char[0x0000000000001] a", unix.EINVAL},
		{"__test_event __data_loc char[] a", 0},
		{"__test_event __data_loc unsigned char[] a", 0},
		{"__test_event __rel_loc char[] a", 0},
		{"__test_event __rel_loc unsigned char[] a", 0},
		{"__test_event struct custom a 20", 0},
		{"__test_event struct custom a", unix.EINVAL},
		{"__test_event char a 20", unix.EINVAL},
		// Spec §1.1-§1.3.
		{"x", 0},
		{"x ", 0},
		{"", 0},
		{" u32 a", 0},
		{"x:", unix.EINVAL},
		{"x:f u32 a", unix.EINVAL},
		{"n:f", unix.EINVAL},
		{"x u32 a;", 0},
		{"x u32 a;; u32 b", 0},
		{"x u32 a ", unix.EINVAL},
		{"x u32 a ;u32 b", unix.EINVAL},
		{"x u32  a", unix.EINVAL},
		{"x u32\ta", unix.EINVAL},
		{"x\tu32 a", unix.EINVAL}, // the name is "x\tu32"; the field "a" has no name
		{"x u32 a;\tu32 b", 0},
		{"x u32 a b", unix.EINVAL},
		{"x u32", unix.EINVAL},
		{"x unsigned int", unix.EINVAL},
		{"x struct foo", unix.EINVAL},
		{"x u32 ", 0}, // a field with an empty name: strsep gives "" as the name
		{"x long a", unix.EINVAL},
		{"x unsigned long a", unix.EINVAL},
		{"x bool a", unix.EINVAL},
		{"x _Bool a", unix.EINVAL},
		{"x size_t a", unix.EINVAL},
		{"x __u32 a", unix.EINVAL},
		{"x uint32_t a", unix.EINVAL},
		{"x long long a", unix.EINVAL},
		{"x signed int a", unix.EINVAL},
		{"x u8[4] a", unix.EINVAL},
		{"x int[4] a", unix.EINVAL},
		{"x char * a", unix.EINVAL},
		{"x char[0] a", unix.EINVAL},
		{"x char[] a", unix.EINVAL},
		{"x char[ a", unix.EINVAL},
		{"x char[1024] a", 0},
		{"x char[1025] a", unix.EINVAL},
		{"x char[4]xyz a", 0},
		{"x char[4]xyzab a", 0},            // 7 characters after '['
		{"x char[4]xyzabc a", unix.EINVAL}, // 8 characters after '['
		{"x char[024] a", 0},
		{"x char[08] a", unix.EINVAL},
		{"x char[+5] a", 0},
		{"x char[-5] a", unix.EINVAL},
		{"x char[4\n] a", 0},
		{"x char[0x] a", unix.EINVAL},
		{"x __data_loc u8[] a", 0},
		{"x __data_loc char a", 0},
		{"x __rel_loc char[20] a", 0},
		{"x __data_loc", unix.EINVAL},
		{"x struct s a 0", unix.EINVAL},
		{"x struct s a 0x14", unix.EINVAL},
		{"x struct s a +20", 0},
		{"x struct s a 4294967295", unix.EPERM},
		{"x struct s a 4294967274", unix.EINVAL},
		{"x struct s a 4294967296", unix.EINVAL},
		{"x struct s a 2147483648", unix.Errno(2147483648)},
		{"x struct s a 2147483647", 0},
	}
	for _, tt := range tests {
		ev, err := Parse(tt.cmd)
		if tt.errno == 0 {
			if err != nil {
				t.Errorf("Parse(%q) = %v, want success", tt.cmd, err)
			} else if ev == nil {
				t.Errorf("Parse(%q) returned no event", tt.cmd)
			}
			continue
		}
		if !errors.Is(err, tt.errno) {
			t.Errorf("Parse(%q) = %v, want errno %d (%s)", tt.cmd, err, int64(tt.errno), ErrnoString(tt.errno))
		}
		var perr *Error
		if !errors.As(err, &perr) || perr.Reason == "" {
			t.Errorf("Parse(%q): error %v is not an *Error with a reason", tt.cmd, err)
		}
	}
}

func TestParseLayout(t *testing.T) {
	ev, err := Parse("__test_event u32 field1; char[8] msg; __rel_loc char[] s")
	if err != nil {
		t.Fatal(err)
	}
	want := &Event{
		Name: "__test_event",
		Fields: []Field{
			{Type: "u32", Name: "field1", Offset: 8, Size: 4, Kind: Integer},
			{Type: "char[8]", Name: "msg", Offset: 12, Size: 8, Signed: true, Kind: Array, Filter: FilterStaticString},
			{Type: "__rel_loc char[]", Name: "s", Offset: 20, Size: 4, Signed: true, Kind: RelLoc, Filter: FilterRDynString, CString: true},
		},
		MinSize: 16,
		hasLoc:  true,
	}
	if diff := cmp.Diff(want, ev, cmp.AllowUnexported(Event{}), cmpopts.IgnoreUnexported(Field{})); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}

	// Packed, no alignment: u8 a; u64 b gives b at 9.
	ev, _ = Parse("p u8 a; u64 b")
	if ev.Fields[1].Offset != 9 || ev.MinSize != 9 {
		t.Errorf("u8 a; u64 b: b at %d, min_size %d; want 9, 9", ev.Fields[1].Offset, ev.MinSize)
	}
	// The tab stays in the name; the name ends at the first space.
	ev, _ = Parse("x\ty u32 a")
	if ev.Name != "x\ty" || len(ev.Fields) != 1 {
		t.Errorf("name with a tab: got %q with %d fields", ev.Name, len(ev.Fields))
	}
	// A command ends at its first NUL, as the C string the kernel copies.
	ev, _ = Parse("x u32 a\x00; u32 b")
	if len(ev.Fields) != 1 {
		t.Errorf("NUL did not end the command: %d fields", len(ev.Fields))
	}
	// Struct sizes near 2^31 wrap the kernel's int min_size.
	ev, err = Parse("w struct a x 2147483647; struct b y 2147483647; u8 z")
	if err != nil {
		t.Fatal(err)
	}
	if ev.MinSize >= 0 || ev.CheckSize(1<<20) == nil {
		t.Errorf("wrapped min_size %d should reject every payload", ev.MinSize)
	}
}

func TestErrorText(t *testing.T) {
	_, err := Parse("x u32 a; char[9999] b")
	want := `invalid argument (EINVAL): field 2 "char[9999] b": array length 9999 is over 1024`
	if err == nil || err.Error() != want {
		t.Errorf("error text:\n got %v\nwant %s", err, want)
	}
}

func TestKstrtoull(t *testing.T) {
	tests := []struct {
		s    string
		base uint64
		v    uint64
		ok   bool
	}{
		{"20", 0, 20, true}, {"0x14", 0, 20, true}, {"0X14", 0, 20, true}, {"024", 0, 20, true},
		{"+7", 0, 7, true}, {"7\n", 0, 7, true}, {"7\n\n", 0, 0, false}, {"", 0, 0, false},
		{"0", 0, 0, true}, {"0x", 0, 0, false}, {"0xg", 0, 0, false}, {"08", 0, 0, false},
		{"++1", 0, 0, false}, {"-1", 0, 0, false}, {" 1", 0, 0, false},
		{"0x14", 10, 0, false}, {"18446744073709551615", 10, 1<<64 - 1, true},
		{"18446744073709551616", 10, 0, false},
	}
	for _, tt := range tests {
		v, ok := kstrtoull(tt.s, tt.base)
		if v != tt.v || ok != tt.ok {
			t.Errorf("kstrtoull(%q, %d) = %d, %v; want %d, %v", tt.s, tt.base, v, ok, tt.v, tt.ok)
		}
	}
}

func TestCtype(t *testing.T) {
	// lib/ctype.c is ISO 8859-1: 0xA0 is a space; 0xA0..0xFF are printable,
	// 0x80..0x9F are not.
	for c := 0; c < 256; c++ {
		wantSpace := strings.ContainsRune("\t\n\v\f\r ", rune(c)) || c == 0xA0
		wantPrint := (c >= 0x20 && c < 0x7f) || c >= 0xA0
		if isSpace(byte(c)) != wantSpace || isPrint(byte(c)) != wantPrint {
			t.Errorf("byte %#x: space %v print %v", c, isSpace(byte(c)), isPrint(byte(c)))
		}
	}
	if got := ArgvSplit(" a\t b\xa0c  "); !cmp.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("ArgvSplit = %q", got)
	}
}
