package main

import (
	"bytes"
	"strings"
	"testing"
)

func run(args ...string) (string, error) {
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestDescribe(t *testing.T) {
	out, err := run("describe", "req u32 status; __rel_loc char[] path", "--id", "407", "--payload", "2a000000 00000500 2f61626300")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# events/user_events/req/format\nname: req\nID: 407\n",
		"\tfield:__rel_loc char path[];\toffset:12;\tsize:4;\tsigned:1;\n",
		"print fmt: \"status=%u path=%s\", REC->status, __get_rel_str(path)\n",
		"# dynamic_events\nu:req u32 status; __rel_loc char[] path\n",
		"req: status=0x2a (42) path=/abc\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _ = run("describe", "req __data_loc char[] s", "--payload", "0c000200 6162")
	if !strings.Contains(out, "bad address (EFAULT): field 1 \"s\": __data_loc string at 12, 2 bytes long, does not end in NUL") {
		t.Errorf("EFAULT not explained:\n%s", out)
	}
	out, _ = run("describe", "m u8 a", "--multi-id", "10")
	if !strings.Contains(out, "# events/user_events_multi/m.a/format\nname: m.a\n") {
		t.Errorf("multi-format name:\n%s", out)
	}
}

func TestDescribeError(t *testing.T) {
	_, err := run("describe", "x u32 a ")
	want := `describe "x u32 a ": invalid argument (EINVAL): field 1 "u32 a ": only struct fields take a size ("" after the name)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}
