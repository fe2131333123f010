package ftrace

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/eventdef"
)

// The trace file of spec §9 (kernel-user-events.md), one write to __t on
// the reference kernel.
const specTrace = `# tracer: nop
#
# entries-in-buffer/entries-written: 1/1   #P:2
#
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
            emit-48      [000] .....     1.492780: __t: a='A'(65) b=0xfffe (65534) c=0xdeadbeef (-559038737) d=0xfffffffffffffffb (-5) e=hello f=abc g=xy h=<INVALID-SIZE> i=(7)
`

func mustParse(t testing.TB, cmd string) *eventdef.Event {
	t.Helper()
	ev, err := eventdef.Parse(cmd)
	if err != nil {
		t.Fatalf("parse %q: %v", cmd, err)
	}
	return ev
}

func record(typ uint16, flags, preempt byte, pid int32, payload []byte) []byte {
	rec := make([]byte, 8, 8+len(payload))
	binary.NativeEndian.PutUint16(rec, typ)
	rec[2], rec[3] = flags, preempt
	binary.NativeEndian.PutUint32(rec[4:], uint32(pid))
	return append(rec, payload...)
}

func TestSpecTrace(t *testing.T) {
	ev := mustParse(t, "__t u8 a; s16 b; u32 c; s64 d; char[6] e; __rel_loc char[] f; __data_loc char[] g; struct s h 3; char i")
	// a=65 b=-2 c=0xdeadbeef d=-5 e="hello" f="abc" g="xy" h=01 02 03 i=7
	p := make([]byte, 0, 40)
	p = append(p, 65)
	p = binary.NativeEndian.AppendUint16(p, 0xfffe)
	p = binary.NativeEndian.AppendUint32(p, 0xdeadbeef)
	p = binary.NativeEndian.AppendUint64(p, uint64(math.MaxUint64-4))
	p = append(p, "hello\x00"...)
	// f: __rel_loc at record offset 29, relative to offset 33; g:
	// __data_loc at 33; h at 37 (3 bytes); i at 40; data from 41.
	p = binary.NativeEndian.AppendUint32(p, 4<<16|(41+3-33)) // "abc\0" after "xy\0"
	p = binary.NativeEndian.AppendUint32(p, 3<<16|41)
	p = append(p, 1, 2, 3, 7)
	p = append(p, "xy\x00abc\x00"...)
	e := &Entry{TS: 1492780123, CPU: 0, PID: 48, Comm: "emit", Event: ev, Tracepoint: "__t", Record: record(1, 0, 0, 48, p)}
	got := string(AppendLine(AppendHeader(nil, 1, 1, 2), e))
	if got != specTrace {
		t.Errorf("trace (-spec +ours):\n%s", cmp.Diff(specTrace, got))
	}
}

func TestAppendContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Entry
		want string
	}{
		{"golden", Entry{TS: 2411797000, PID: 47, Comm: "eventgolden"}, "     eventgolden-47      [000] .....     2.411797: "},
		{"15-byte comm", Entry{TS: 0, PID: 1, Comm: "abcdefghijklmno"}, " abcdefghijklmno-1       [000] .....     0.000000: "},
		{"16-byte comm is cut to 15", Entry{PID: 1, Comm: "abcdefghijklmnop"}, " abcdefghijklmno-1       [000] .....     0.000000: "},
		{"pid 0", Entry{PID: 0, Comm: "swapper"}, "          <idle>-0       [000] .....     0.000000: "},
		{"negative pid", Entry{PID: -5, Comm: "x"}, "           <XXX>--5      [000] .....     0.000000: "},
		{"unknown comm", Entry{PID: 9}, "           <...>-9       [000] .....     0.000000: "},
		{"8-digit pid widens", Entry{PID: 12345678, Comm: "p"}, "               p-12345678 [000] .....     0.000000: "},
		{"7-digit pid", Entry{PID: 1234567, Comm: "p"}, "               p-1234567 [000] .....     0.000000: "},
		{"cpu 1000", Entry{CPU: 1000, PID: 1, Comm: "p"}, "               p-1       [1000] .....     0.000000: "},
		{"cpu 42", Entry{CPU: 42, PID: 1, Comm: "p"}, "               p-1       [042] .....     0.000000: "},
		{"rounds down", Entry{TS: 1492780499, PID: 1, Comm: "p"}, "               p-1       [000] .....     1.492780: "},
		{"rounds up", Entry{TS: 1492780500, PID: 1, Comm: "p"}, "               p-1       [000] .....     1.492781: "},
		{"rounds into the next second", Entry{TS: 1999999500, PID: 1, Comm: "p"}, "               p-1       [000] .....     2.000000: "},
		{"wide seconds", Entry{TS: 123456789_000000000, PID: 1, Comm: "p"}, "               p-1       [000] ..... 123456789.000000: "},
		{"u64 wrap as in the kernel", Entry{TS: math.MaxUint64, PID: 1, Comm: "p"}, "               p-1       [000] .....     0.000000: "},
		{"flags", Entry{PID: 1, Comm: "p", Record: record(1, FlagIRQsOff|FlagNeedResched|FlagHardIRQ, 0x21, 1, nil)}, "               p-1       [000] dnh12     0.000000: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendContext(nil, &tc.e)); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// latFlags is trace_print_lat_fmt written out differently: as the
// kernel's conditions in order, over the bits.
func latFlags(flags, pc byte) string {
	has := func(m byte) bool { return flags&m == m }
	var b strings.Builder
	switch {
	case has(FlagIRQsOff | FlagBHOff):
		b.WriteByte('D')
	case has(FlagIRQsOff):
		b.WriteByte('d')
	case has(FlagBHOff):
		b.WriteByte('b')
	case has(FlagIRQsNoSupport):
		b.WriteByte('X')
	default:
		b.WriteByte('.')
	}
	switch {
	case has(FlagNeedResched | FlagPreemptResched):
		b.WriteByte('N')
	case has(FlagNeedResched):
		b.WriteByte('n')
	case has(FlagPreemptResched):
		b.WriteByte('p')
	default:
		b.WriteByte('.')
	}
	switch {
	case has(FlagNMI | FlagHardIRQ):
		b.WriteByte('Z')
	case has(FlagNMI):
		b.WriteByte('z')
	case has(FlagHardIRQ | FlagSoftIRQ):
		b.WriteByte('H')
	case has(FlagHardIRQ):
		b.WriteByte('h')
	case has(FlagSoftIRQ):
		b.WriteByte('s')
	default:
		b.WriteByte('.')
	}
	for _, n := range []byte{pc & 0xf, pc >> 4} {
		if n == 0 {
			b.WriteByte('.')
		} else {
			b.WriteByte("0123456789abcdef"[n])
		}
	}
	return b.String()
}

func TestAppendLatFlagsAll(t *testing.T) {
	for f := range 256 {
		for pc := range 256 {
			got := string(AppendLatFlags(nil, byte(f), byte(pc)))
			if want := latFlags(byte(f), byte(pc)); got != want {
				t.Fatalf("flags %#x preempt %#x: %q, want %q", f, pc, got, want)
			}
			if parseLatFlags(got) != [2]byte{canonical(byte(f)), byte(pc)} {
				t.Fatalf("flags %#x preempt %#x: %q does not parse back", f, pc, got)
			}
		}
	}
	for _, tc := range []struct {
		flags, pc byte
		want      string
	}{
		{0, 0, "....."},
		{FlagIRQsOff | FlagBHOff, 0, "D...."},
		{FlagIRQsOff | FlagIRQsNoSupport, 0, "d...."},
		{FlagIRQsNoSupport, 0, "X...."},
		{FlagNeedResched | FlagPreemptResched, 0, ".N..."},
		{FlagNMI | FlagHardIRQ | FlagSoftIRQ, 0, "..Z.."},
		{FlagSoftIRQ, 0xff, "..sff"},
		{0, 0x10, "....1"},
	} {
		if got := string(AppendLatFlags(nil, tc.flags, tc.pc)); got != tc.want {
			t.Errorf("flags %#x preempt %#x: %q, want %q", tc.flags, tc.pc, got, tc.want)
		}
	}
}

// canonical drops the flag bits that another bit hides in the text.
func canonical(f byte) byte {
	if f&(FlagIRQsOff|FlagBHOff) != 0 {
		f &^= FlagIRQsNoSupport
	}
	if f&FlagNMI != 0 {
		f &^= FlagSoftIRQ
	}
	return f
}

func TestAppendLineUnknownType(t *testing.T) {
	e := &Entry{TS: 7384652000, PID: 51, Comm: "ftcapture", Record: record(411, 0, 0, 51, []byte{42, 0, 0, 0})}
	want := "       ftcapture-51      [000] .....     7.384652: Unknown type 411\n"
	if got := string(AppendLine(nil, e)); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAnnotations(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{string(AppendLost(nil, 0, 78)), "CPU:0 [LOST 78 EVENTS]\n"},
		{string(AppendLost(nil, 3, LostUnknown)), "CPU:3 [LOST EVENTS]\n"},
		{string(AppendBufferStarted(nil, 1)), "##### CPU 1 buffer started ####\n"},
		{string(AppendStats(nil, Stats{Entries: 8, Bytes: 392, OldestTS: 3327507000, NowTS: 3973508400, ReadEvents: 2})),
			"entries: 8\noverrun: 0\ncommit overrun: 0\nbytes: 392\noldest event ts:     3.327507\nnow ts:     3.973508\ndropped events: 0\nread events: 2\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
