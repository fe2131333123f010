package main

import (
	"os"
	"testing"

	"github.com/uetrace/uetrace/internal/subsys"
)

// TestStatusFieldsAsDynamicEvents: the FIELDS column shows an event's
// fields as dynamic_events does (user_event_show). The format files are
// Linux 6.12.117's, from the VM, for "u:stx char[5] a; struct S b 8; u32 c",
// which its dynamic_events showed as written; the others are made the
// same way (char and unsigned char arrays as "char a[]", loc fields
// keeping their brackets).
func TestStatusFieldsAsDynamicEvents(t *testing.T) {
	const header = "name: stx\nID: 408\nformat:\n" +
		"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" +
		"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" +
		"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" +
		"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
	tests := []struct{ format, want string }{
		{header +
			"\tfield:char a[];\toffset:8;\tsize:5;\tsigned:1;\n" +
			"\tfield:struct S b;\toffset:13;\tsize:8;\tsigned:1;\n" +
			"\tfield:u32 c;\toffset:21;\tsize:4;\tsigned:0;\n\n" +
			"print fmt: \"a=%s b=%llu c=%u\", REC->a, REC->b, REC->c\n",
			"char[5] a; struct S b 8; u32 c"},
		{header + "\tfield:unsigned char raw[];\toffset:8;\tsize:16;\tsigned:0;\n" +
			"\tfield:__rel_loc char path[];\toffset:24;\tsize:4;\tsigned:1;\n",
			"unsigned char[16] raw; __rel_loc char[] path"},
		{header + "\nprint fmt: \"\"\n", "-"},
	}
	for _, tt := range tests {
		id, got := parseFormat(tt.format)
		if id != "408" || got != tt.want {
			t.Errorf("parseFormat: ID %q, fields %q; want 408, %q", id, got, tt.want)
		}
	}
}

// TestStatusFieldsOfSubsys: on uetrace's own tree the FIELDS of an event
// are its dynamic_events line's.
func TestStatusFieldsOfSubsys(t *testing.T) {
	s := subsys.New(subsys.Options{})
	root := subsys.Cred{PerfmonCapable: true}
	const fields = "char[5] a; struct S b 8; u32 c; unsigned char[3] d; __rel_loc u32[] e; __data_loc char[] f"
	if err := s.FS().WriteFile("dynamic_events", []byte("u:stx "+fields), os.O_APPEND, root); err != nil {
		t.Fatal(err)
	}
	dyn, err := s.FS().ReadFile("dynamic_events", root)
	if err != nil || string(dyn) != "u:stx "+fields+"\n" {
		t.Fatalf("dynamic_events %q, %v", dyn, err)
	}
	format, err := s.FS().ReadFile("events/user_events/stx/format", root)
	if err != nil {
		t.Fatal(err)
	}
	if _, got := parseFormat(string(format)); got != fields {
		t.Errorf("FIELDS %q, want %q (dynamic_events)", got, fields)
	}
}
