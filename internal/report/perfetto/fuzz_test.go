package perfetto

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzInstant writes arbitrary strings, ids and values and checks that the
// output always parses as perfetto.protos.Trace with nothing unknown, only
// valid UTF-8, and the content written (strings repaired as documented).
func FuzzInstant(f *testing.F) {
	f.Add(int32(1), int32(2), "proc", "thr", "cat", "name", "arg", "value", int64(-1), uint64(1), []byte{1, 2})
	f.Add(int32(0), int32(0), "", "", "", "", "", "", int64(0), uint64(0), []byte(nil))
	f.Add(int32(-1), int32(2147483647), "\xff", "a\x80b", "\xc3", "\xed\xa0\x80", "\xfe\xff", "x\xffy", int64(-9223372036854775808), uint64(18446744073709551615), []byte{0xff})
	f.Fuzz(func(t *testing.T, pid, tid int32, pname, tname, cat, name, argName, str string, i int64, u uint64, raw []byte) {
		fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		args := []Arg{String(argName, str), Int(argName, i), Uint("", u), Bytes(argName+"b", raw), Bool(argName, i < 0)}
		data := write(t, func(w *Writer) {
			must(t, w.Process(pid, pname))
			must(t, w.Thread(pid, tid, tname))
			must(t, w.Instant(u, pid, tid, cat, name, args))
			// A second event reuses every interned string.
			must(t, w.Instant(u+1, pid, tid, cat, name, args))
		})
		d := decodeTrace(t, data)
		an := fix(argName)
		if argName == "" {
			an = "arg0"
		}
		an1 := fix(argName)
		if argName == "" {
			an1 = "arg1"
		}
		hexRaw := hex.EncodeToString(raw)
		wantArgs := []dArg{
			{an, "string", fix(str)},
			{an1, "int", i},
			{"arg2", "uint", u},
			{fix(argName + "b"), "string", hexRaw},
			{fix(argName), "bool", i < 0},
		}
		if argName == "" {
			wantArgs[4].Name = "arg4"
		}
		ev := dEvent{PID: pid, TID: tid, Category: fix(cat), Name: fix(name), Args: wantArgs}
		e1, e2 := ev, ev
		e1.TS, e2.TS = u, u+1
		if diff := cmp.Diff([]dEvent{e1, e2}, d.Events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		procs, threads := trackIndex(d)
		if got := procs[pid].Name; got != fix(pname) {
			t.Errorf("process name %q, want %q", got, fix(pname))
		}
		if got := threads[[2]int32{pid, tid}].Name; got != fix(tname) {
			t.Errorf("thread name %q, want %q", got, fix(tname))
		}
	})
}
