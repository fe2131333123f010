package eventdef

import (
	"strings"
	"testing"
)

func mustParse(t testing.TB, cmd string) *Event {
	t.Helper()
	ev, err := Parse(cmd)
	if err != nil {
		t.Fatalf("Parse(%q): %v", cmd, err)
	}
	return ev
}

func TestFormatWorkedExample(t *testing.T) {
	// Spec §1.5, captured from the reference kernel.
	want := "name: __test_event\n" +
		"ID: 1234\n" +
		"format:\n" +
		"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" +
		"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" +
		"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" +
		"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n" +
		"\n" +
		"\tfield:u32 field1;\toffset:8;\tsize:4;\tsigned:0;\n" +
		"\tfield:char msg[];\toffset:12;\tsize:8;\tsigned:1;\n" +
		"\tfield:__rel_loc char s[];\toffset:20;\tsize:4;\tsigned:1;\n" +
		"\n" +
		"print fmt: \"field1=%u msg=%s s=%s\", REC->field1, REC->msg, __get_rel_str(s)\n"
	ev := mustParse(t, "__test_event u32 field1; char[8] msg; __rel_loc char[] s")
	if got := ev.Format("__test_event", 1234); got != want {
		t.Errorf("format:\n%s\nwant:\n%s", got, want)
	}
	if got, want := ev.DynamicEventsLine(), "u:__test_event u32 field1; char[8] msg; __rel_loc char[] s"; got != want {
		t.Errorf("dynamic_events %q, want %q", got, want)
	}
}

func TestFormatNoFields(t *testing.T) {
	got := mustParse(t, "__test_event").Format("__test_event", 7)
	if !strings.HasSuffix(got, "signed:1;\n\n\nprint fmt: \"\"\n") {
		t.Errorf("no-field format ends %q", got[len(got)-40:])
	}
}

func TestFormatLines(t *testing.T) {
	// Spec §9, checked on the reference kernel.
	ev := mustParse(t, "x unsigned char[20] m; __rel_loc unsigned char[] r; char c; short s")
	got := ev.Format("x", 1)
	for _, line := range []string{
		"\tfield:unsigned char m[];\toffset:8;\tsize:20;\tsigned:0;\n",
		"\tfield:__rel_loc unsigned char r[];\toffset:28;\tsize:4;\tsigned:1;\n",
		"\tfield:char c;\toffset:32;\tsize:1;\tsigned:1;\n",
		"\tfield:short s;\toffset:33;\tsize:2;\tsigned:1;\n",
		"print fmt: \"m=%s r=%s c=%d s=%d\", REC->m, __get_rel_str(r), REC->c, REC->s\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("format lacks %q:\n%s", line, got)
		}
	}
	if got := mustParse(t, "x __data_loc char[] d; struct foo a 20").Format("x", 1); !strings.Contains(got, "\tfield:__data_loc char[] d;\toffset:8;") ||
		!strings.Contains(got, "\tfield:struct foo a;\toffset:12;\tsize:20;\tsigned:1;\n") {
		t.Errorf("format:\n%s", got)
	}
}

func TestPrintFmt(t *testing.T) {
	// ftrace_test print_fmt, plus spec §1.6.
	tests := []struct{ fields, want string }{
		{"__rel_loc char[] data", `"data=%s", __get_rel_str(data)`},
		{"__data_loc char[] data", `"data=%s", __get_str(data)`},
		{"s64 data", `"data=%lld", REC->data`},
		{"u64 data", `"data=%llu", REC->data`},
		{"s32 data", `"data=%d", REC->data`},
		{"u32 data", `"data=%u", REC->data`},
		{"int data", `"data=%d", REC->data`},
		{"unsigned int data", `"data=%u", REC->data`},
		{"s16 data", `"data=%d", REC->data`},
		{"u16 data", `"data=%u", REC->data`},
		{"short data", `"data=%d", REC->data`},
		{"unsigned short data", `"data=%u", REC->data`},
		{"s8 data", `"data=%d", REC->data`},
		{"u8 data", `"data=%u", REC->data`},
		{"char data", `"data=%d", REC->data`},
		{"unsigned char data", `"data=%u", REC->data`},
		{"char[4] data", `"data=%s", REC->data`},
		{"struct foo a 20", `"a=%llu", REC->a`},
		{"u32 x; char[8] y", `"x=%u y=%s", REC->x, REC->y`},
		{"", `""`},
		{"__data_loc char d", `"d=%llu", __get_str(d)`},
		{"__data_loc u8[] d", `"d=%llu", REC->d`},
	}
	for _, tt := range tests {
		if got := mustParse(t, "__test_event "+tt.fields).PrintFmt(); got != tt.want {
			t.Errorf("%q: print fmt %s, want %s", tt.fields, got, tt.want)
		}
	}
}

func TestDynamicEventsLine(t *testing.T) {
	tests := []struct{ cmd, want string }{
		{"test u32 count", "u:test u32 count"},
		{"__test_event u32 field1;u32 field2", "u:__test_event u32 field1; u32 field2"},
		{"e struct my_struct a 20; __data_loc char[] s", "u:e struct my_struct a 20; __data_loc char[] s"},
		{"__test_event", "u:__test_event"},
		{"__test_event ;;", "u:__test_event"},
		{"c char[4]xyz a", "u:c char[4]xyz a"},
		{"s struct s a +20", "u:s struct s a 20"},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.cmd).DynamicEventsLine(); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.cmd, got, tt.want)
		}
	}
}

func TestMultiName(t *testing.T) {
	for id, want := range map[uint64]string{0: "__abi_event.0", 10: "__abi_event.a", 255: "__abi_event.ff"} {
		if got := MultiName("__abi_event", id); got != want {
			t.Errorf("MultiName(%d) = %q, want %q", id, got, want)
		}
	}
}
