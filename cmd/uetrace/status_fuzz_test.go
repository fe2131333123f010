package main

import (
	"strings"
	"testing"
)

// FuzzSplitStatus: the events' lines and the footer are the text's lines,
// in order, less at most the one blank line between them; the footer
// holds only Active and Busy lines.
func FuzzSplitStatus(f *testing.F) {
	f.Add("\nok_ev\n\nActive: 2\nBusy: 0\n")
	f.Add("a # Used by ftrace\n\nActive: 1\nBusy: 1\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		lines, footer := splitStatus(text)
		all := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if text == "" {
			all = nil
		}
		for _, l := range footer {
			if !strings.HasPrefix(l, "Active: ") && !strings.HasPrefix(l, "Busy: ") {
				t.Fatalf("footer line %q", l)
			}
		}
		gap := len(all) - len(lines) - len(footer)
		if gap != 0 && gap != 1 {
			t.Fatalf("%d lines, %d events' and %d footer's", len(all), len(lines), len(footer))
		}
		if strings.Join(lines, "\n") != strings.Join(all[:len(lines)], "\n") {
			t.Fatalf("events' lines %q are not the first of %q", lines, all)
		}
	})
}

func TestSplitStatus(t *testing.T) {
	// Linux 6.12 with an event of an empty name and ok_ev (VM, cat).
	lines, footer := splitStatus("\nok_ev\n\nActive: 2\nBusy: 0\n")
	if strings.Join(lines, "|") != "|ok_ev" || strings.Join(footer, ", ") != "Active: 2, Busy: 0" {
		t.Errorf("lines %q footer %q", lines, footer)
	}
}
