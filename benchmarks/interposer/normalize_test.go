package interposer

import (
	"bytes"
	"fmt"
	"testing"
)

func TestNormalize(t *testing.T) {
	// Two runs of one program: the same records, written by other tasks
	// (python3's process and thread, my-prog's), on other CPUs, at other
	// times — the trace file's python3 lines in the kernel's widths
	// (trace_print_context: "%16s-%-7d ", "[%03d] "), my-prog's with a
	// comm of a space and a dash and its tgid (record-tgid: "(%7d) "),
	// then a line of uetrace report's.
	run := func(pid, tid, prog, cpu0, cpu1 int, t0, t1, t2 string) string {
		return fmt.Sprintf(`# tracer: nop
# entries-in-buffer/entries-written: 4/4   #P:2
         python3-%-7[1]d [%03[4]d] ..... %[6]s: py_fixed: n=0x1 (1) tag=tag-00001
         python3-%-7[2]d [%03[5]d] ..... %[7]s: py_fixed: n=0xa (10) tag=thread
 my-prog-1 2-%[3]d (%7[3]d) [%03[5]d] d.... %[8]s: ev: a=1
 python3   %[1]d/%[2]d   [%03[5]d] %[7]s:             user_events:py_fixed: n=10 tag=thread
`, pid, tid, prog, cpu0, cpu1, t0, t1, t2)
	}
	run1 := run(13181, 13242, 99, 0, 1, "12698.345676", "12698.347659", "7.000001")
	run2 := run(7, 123456, 5, 1, 0, "99.000001", "100.000002", "8.000001")
	want := `# tracer: nop
# entries-in-buffer/entries-written: 4/4   #P:2
python3-P1 [CPU] ..... TIME: py_fixed: n=0x1 (1) tag=tag-00001
python3-P2 [CPU] ..... TIME: py_fixed: n=0xa (10) tag=thread
my-prog-1 2-P3 (P3) [CPU] d.... TIME: ev: a=1
python3 P1/P2 [CPU] TIME:             user_events:py_fixed: n=10 tag=thread
`
	for _, run := range []string{run1, run2} {
		if got := Normalize([]byte(run)); string(got) != want {
			t.Errorf("Normalize:\n%s\ngot:\n%s\nwant:\n%s", run, got, want)
		}
	}
	// What is not a task id, a CPU or a time still counts: a field, the
	// flags, which task wrote which record, the headers.
	for _, other := range []string{
		replace(run1, "n=0xa (10)", "n=0xb (11)"),
		replace(run1, "[001] ..... 12698.347659", "[001] d.... 12698.347659"),
		replace(run1, "python3-13242", "python3-13181"),
		replace(run1, "4/4", "4/5"),
	} {
		if bytes.Equal(Normalize([]byte(other)), Normalize([]byte(run1))) {
			t.Errorf("Normalize hides the difference of\n%s\nfrom\n%s", other, run1)
		}
	}
}

func replace(s, old, new string) string {
	return string(bytes.Replace([]byte(s), []byte(old), []byte(new), 1))
}

// FuzzNormalize: any text, a line out for each line in, and a line that
// is not a record's unchanged.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte("         python3-13181   [000] ..... 12698.345676: py_fixed: n=0x1 (1)\n# x\n"))
	f.Add([]byte(" python3   13181/13242   [001] 12698.347659: user_events:py_fixed: n=10\nno record\n"))
	f.Add([]byte("a-1 (-------) [0] x 1.0: b-2 [0] y 2.0:"))
	f.Fuzz(func(t *testing.T, text []byte) {
		out := Normalize(text)
		if bytes.Count(out, []byte("\n")) != bytes.Count(text, []byte("\n")) {
			t.Fatalf("%q: %d lines in, %q out", text, bytes.Count(text, []byte("\n")), out)
		}
		for line := range bytes.Lines(text) {
			if !traceContext.Match(line) && !reportContext.Match(line) && !bytes.Contains(out, line) {
				t.Fatalf("%q: the line %q, not a record's, is not in the output %q", text, line, out)
			}
		}
	})
}
