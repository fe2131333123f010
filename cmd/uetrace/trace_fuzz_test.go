package main

import (
	"strings"
	"testing"
)

// FuzzTraceLineFilter feeds the trace line filter arbitrary text in
// arbitrary pieces: it keeps whole lines only, each by keep, whatever the
// splits.
func FuzzTraceLineFilter(f *testing.F) {
	f.Add("# tracer: nop\n           <...>-1234    [001] .....  1.5: x: a=1\n", 5, 1234, "x")
	f.Add("  a-b-c-77 ( 70) [000] d..1. 2: y:\nno newline at the end", 3, 70, "a-b-c")
	f.Add("-1 [1]\n-- [-] \n\n", 1, 1, "")
	f.Fuzz(func(t *testing.T, text string, piece, pid int, comm string) {
		if piece <= 0 || piece > 1<<10 {
			piece = 1
		}
		lf := &lineFilter{pids: []int{pid}, comms: []string{comm}}
		var got strings.Builder
		w := lf.writer(&got)
		for i := 0; i < len(text); i += piece {
			w.Write([]byte(text[i:min(i+piece, len(text))]))
		}
		w.(*filterWriter).flush()
		var want strings.Builder
		for _, l := range strings.SplitAfter(text, "\n") {
			if l != "" && lf.keep([]byte(l)) {
				want.WriteString(l)
			}
		}
		if got.String() != want.String() {
			t.Fatalf("in pieces of %d:\n%q\nline by line:\n%q", piece, got.String(), want.String())
		}
	})
}
