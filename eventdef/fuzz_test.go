package eventdef

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var fuzzSeeds = []string{
	"__test_event u32 field1; char[8] msg; __rel_loc char[] s",
	"__t u8 a; s16 b; u32 c; s64 d; char[6] e; __rel_loc char[] f; __data_loc char[] g; struct s h 3; char i",
	"x unsigned char[20] m; __rel_loc unsigned char[] r; char c; short s",
	"x u32 a;; u32 b;", "x u32  a", "x u32 a ", "x:f", "x char[0x14] a", "x char[4]xyz a",
	"x struct s a 4294967295", "x __data_loc u8[] b", "x __data_loc  a", "x u32 ", "",
	"x unsigned int a; unsigned short b; unsigned char c", "x int a;\tshort b;\nchar c",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		ev, err := Parse(cmd)
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) || perr.Errno == 0 || perr.Reason == "" {
				t.Fatalf("Parse(%q): error %v is not an *Error with errno and reason", cmd, err)
			}
			if ev != nil {
				t.Fatalf("Parse(%q) returned an event with an error", cmd)
			}
			return
		}
		_ = ev.Format(ev.Name, 1)
		// Parsing the event's own dynamic_events text gives the same event.
		again, err := Parse(ev.String())
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its text %q: %v", cmd, ev.String(), err)
		}
		if diff := cmp.Diff(ev, again, cmp.AllowUnexported(Event{}, Field{})); diff != "" {
			t.Fatalf("round trip of %q via %q (-first +second):\n%s", cmd, ev.String(), diff)
		}
		// Where the kernel's normalisation leaves the field text as it is, an
		// event matches its own text on both paths.
		fields := string(ev.AppendFields(nil))
		if strings.Join(ArgvSplit(respace(fields)), " ") == fields {
			if !ev.MatchArgs(fields) || !ev.MatchDeleteArgs(fields) {
				t.Fatalf("event %q does not match its own fields %q", cmd, fields)
			}
		}
		// The layout is packed from HeaderSize.
		off := HeaderSize
		for _, f := range ev.Fields {
			if f.Offset != int(int32(uint32(off))) {
				t.Fatalf("%q: field %q at %d, want %d", cmd, f.Name, f.Offset, off)
			}
			off += f.Size
		}
	})
}

// matchReference is user_field_match as the kernel writes it: build both
// strings and compare.
func matchReference(e *Event, argv []string) bool {
	if len(argv) == 0 {
		return len(e.Fields) == 0
	}
	i := 0
	for fi := range e.Fields {
		if i >= len(argv) {
			return false
		}
		var dyn strings.Builder
		colon := false
		for j := i; i < len(argv); i++ {
			if i != j {
				dyn.WriteByte(' ')
			}
			dyn.WriteString(argv[i])
			if strings.Contains(argv[i], ";") {
				i++
				colon = true
				break
			}
		}
		f := &e.Fields[fi]
		s := f.Type + " " + f.Name
		if strings.HasPrefix(f.Type, "struct ") {
			s += " " + itoa(f.Size)
		}
		if colon {
			s += ";"
		}
		if dyn.String() != s {
			return false
		}
	}
	return i == len(argv)
}

func FuzzMatch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "u32 a; u32 b")
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, cmd, args string) {
		ev, err := Parse(cmd)
		if err != nil {
			return
		}
		if got, want := ev.MatchArgs(args), matchReference(ev, ArgvSplit(respace(cString(args)))); got != want {
			t.Fatalf("event %q, args %q: MatchArgs %v, reference %v", cmd, args, got, want)
		}
		if got, want := ev.MatchDeleteArgs(args), matchReference(ev, ArgvSplit(cString(args))); got != want {
			t.Fatalf("event %q, delete args %q: MatchDeleteArgs %v, reference %v", cmd, args, got, want)
		}
	})
}

func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, []byte("\x41\xfe\xff\xef\xbe\xad\xdehello\x00\x00\x00\x00abc\x00"))
	}
	f.Fuzz(func(t *testing.T, cmd string, data []byte) {
		ev, err := Parse(cmd)
		if err != nil || ev.MinSize < 0 || ev.MinSize > 1<<16 {
			return
		}
		// Any bytes decode and print without panicking.
		rec := record(data)
		_ = ev.Validate(rec)
		_ = ev.Decode(nil, rec)
		_ = ev.AppendTrace(nil, ev.Name, rec)

		// Encode values taken from data, then decode them back.
		src := data
		take := func(n int) []byte {
			b := make([]byte, n)
			src = src[copy(b, src):]
			return b
		}
		takeLen := func(limit int) int {
			if len(src) == 0 {
				return 0
			}
			n := int(src[0]) % (limit + 1)
			src = src[1:]
			return n
		}
		var enc Encoder
		enc.Reset(ev, nil)
		want := make([][]byte, len(ev.Fields))
		for i, f := range ev.Fields {
			switch f.Kind {
			case Integer:
				want[i] = take(f.Size)
				enc.Uint(Value{Data: want[i]}.Uint())
			case Array:
				want[i] = bytes.ReplaceAll(take(takeLen(f.Size)), []byte{0}, []byte{1})
				enc.Bytes(want[i])
			case Struct:
				want[i] = take(f.Size)
				enc.Bytes(want[i])
			case DataLoc, RelLoc:
				b := take(takeLen(40))
				if f.CString {
					b = bytes.ReplaceAll(b, []byte{0}, []byte{1})
					enc.String(string(b))
				} else {
					enc.Bytes(b)
				}
				want[i] = b
			}
		}
		payload, err := enc.Payload()
		if err != nil {
			t.Fatalf("encode %q: %v", cmd, err)
		}
		if err := ev.CheckSize(len(payload)); err != nil {
			t.Fatalf("encoded payload of %q: %v", cmd, err)
		}
		rec = record(payload)
		if err := ev.Validate(rec); err != nil {
			t.Fatalf("encoded record of %q does not validate: %v", cmd, err)
		}
		for i, v := range ev.Decode(nil, rec) {
			got := v.Data
			if v.Field.IsText() {
				got = v.Text()
			}
			if v.Overflow || !bytes.Equal(got, want[i]) {
				t.Fatalf("%q field %d (%s): decoded %x (overflow %v), encoded %x", cmd, i+1, v.Field.Type, got, v.Overflow, want[i])
			}
		}
	})
}

// FuzzParseAvailableEvents: every line with a ':' is one tracepoint whose
// "system:name" is the line.
func FuzzParseAvailableEvents(f *testing.F) {
	f.Add([]byte("user_events:a\nuser_events:\nuser_events_multi:b.0\nsched:sched_switch\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		var lines []string
		for l := range strings.SplitSeq(string(text), "\n") {
			if strings.Contains(l, ":") {
				lines = append(lines, l)
			}
		}
		tps := ParseAvailableEvents(text)
		if len(tps) != len(lines) {
			t.Fatalf("%d tracepoints from %d lines", len(tps), len(lines))
		}
		for i, tp := range tps {
			if tp.System+":"+tp.Name != lines[i] || strings.Contains(tp.System, ":") {
				t.Fatalf("line %q read as %+v", lines[i], tp)
			}
		}
	})
}
