package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// uetrace write: what it passes to a tracefs file, and the hints it gives.

// dynamicEvents is the daemon's dynamic_events.
func dynamicEvents(t *testing.T, sock string) string {
	t.Helper()
	return mustCLI(t, sock, "cat", "dynamic_events")
}

// Every dynamic_events delete line the kernel takes passes through
// `uetrace write dynamic_events LINE` unchanged — with and without "--" —
// and deletes what it names; flags still work around it.
func TestCLIWriteDashData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, _, _ := startServe(t)
	for i, tc := range []struct {
		create string // the event, as a dynamic_events line
		del    string // the delete line, as the kernel takes it
	}{
		{"u:dash_a", "-:dash_a"},
		{"u:dash_b u32 x", "-:dash_b u32 x"},
		{"u:dash_c u32 x", "-:user_events/dash_c u32 x"},
		{"u:dash_d u32 x; u32 y", "!u:dash_d u32 x; u32 y"},
		{"u:dash_e u32 x; u32 y", "-:dash_e u32 x; u32 y"},
		{"u:dash_f u32 x", "-:dash_f u32 x # a comment"},
		{"u:dash_g", "-:dash_g\n"},
		{"u:dash_h char[16] s", "-:dash_h char[16] s"},
		{"u:dash_i __rel_loc char[] p", "-:dash_i __rel_loc char[] p"},
		{"u:dash_j struct foo f 8", "-:dash_j struct foo f 8"},
		{"u:dash_k u64 n", "\n-:dash_k u64 n\n\n"},
		{"u:dash_l s8 a", "!x:dash_l s8 a"},
	} {
		name := strings.Fields(strings.TrimPrefix(tc.create, "u:"))[0]
		for _, dashdash := range []bool{false, true} {
			mustCLI(t, sock, "write", "dynamic_events", tc.create)
			if !strings.Contains(dynamicEvents(t, sock), tc.create+"\n") {
				t.Fatalf("%d: %q was not created", i, tc.create)
			}
			args := []string{"write", "dynamic_events", tc.del}
			if dashdash {
				args = []string{"write", "dynamic_events", "--", tc.del}
			}
			if out, errs, code := cli(t, sock, args...); code != 0 {
				t.Errorf("uetrace %q: exit %d\n%s%s", args, code, out, errs)
			}
			if de := dynamicEvents(t, sock); strings.Contains(de, "u:"+name+" ") || strings.Contains(de, "u:"+name+"\n") {
				t.Errorf("uetrace %q left %s:\n%s", args, name, de)
			}
		}
	}

	// A multi-line write with a create and its delete.
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_m u32 a\n-:dash_m u32 a\n")
	if de := dynamicEvents(t, sock); strings.Contains(de, "dash_m") {
		t.Errorf("create-then-delete left dash_m:\n%s", de)
	}

	// Flags before and after the data still are flags; --trunc still works.
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_n u32 a")
	cmd := exec.Command(testutil.Uetrace(t), "write", "dynamic_events", "-:dash_n u32 a", "--backend", "daemon", "--socket", sock)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("flags after a dash TEXT: %v\n%s", err, out)
	}
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_o u32 a")
	mustCLI(t, sock, "write", "--trunc", "dynamic_events", "")
	if de := dynamicEvents(t, sock); de != "" {
		t.Errorf("write --trunc dynamic_events '' left:\n%s", de)
	}
	// "--" itself, after a "--", is the text.
	_, errs, code := cli(t, sock, "write", "dynamic_events", "--", "--")
	if code != 1 || !strings.HasPrefix(errs, `uetrace: write dynamic_events "--": invalid argument (EINVAL)`) {
		t.Errorf(`write dynamic_events -- --: exit %d, %q`, code, errs)
	}
	// A negative value and dash-led patterns are data too.
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_p s32 v")
	hold, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "dash_q s32 v")
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })
	mustCLI(t, sock, "enable", "dash_q")
	mustCLI(t, sock, "emit", "dash_q s32 v", "--field", "v=-5")
	if out := mustCLI(t, sock, "trace"); !strings.Contains(out, "dash_q: v=0xfffffffb (-5)") {
		t.Errorf("emit v=-5: trace:\n%s", out)
	}
	if _, errs, code := cli(t, sock, "enable", "-nosuch"); code != 1 || errs != "uetrace: enable \"-nosuch\": no such file or directory (ENOENT): no event matches (uetrace status lists them)\n" {
		t.Errorf("enable -nosuch: exit %d, %q", code, errs)
	}
	if _, errs, code := cli(t, sock, "write", "events/user_events/dash_q/enable", "-1"); code != 1 || !strings.HasPrefix(errs, `uetrace: write events/user_events/dash_q/enable "-1": invalid argument (EINVAL)`) {
		t.Errorf("write enable -1: exit %d, %q", code, errs)
	}
	hold.Process.Signal(syscall.SIGINT)
	hold.Wait()
}

// A delete that names an existing event without its fields is ENOENT, as
// in Linux, and says which fields to give.
func TestCLIDeleteHint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, _, _ := startServe(t)
	mustCLI(t, sock, "write", "dynamic_events", "u:myev u32 a; char[8] b")
	for _, tc := range []struct{ line, want string }{
		{"!u:myev", `uetrace: write dynamic_events "!u:myev": no such file or directory (ENOENT): event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
		{"-:myev u32 a", `uetrace: write dynamic_events "-:myev u32 a": no such file or directory (ENOENT): event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
		// The delete path does not re-space ';' (spec §6.4).
		{"-:myev u32 a;char[8] b", `uetrace: write dynamic_events "-:myev u32 a;char[8] b": no such file or directory (ENOENT): event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
		{"-:nosuch", `uetrace: write dynamic_events "-:nosuch": no such file or directory (ENOENT): no event nosuch to delete` + "\n"},
		{"-:kprobes/myev u32 a; char[8] b", `uetrace: write dynamic_events "-:kprobes/myev u32 a; char[8] b": no such file or directory (ENOENT): no user event in system "kprobes": user events are in user_events or user_events_multi` + "\n"},
		{"u:other u32 x\n!u:myev", `uetrace: write dynamic_events "u:other u32 x\n!u:myev": no such file or directory (ENOENT): line "!u:myev": event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
	} {
		_, errs, code := cli(t, sock, "write", "dynamic_events", tc.line)
		if code != 1 || errs != tc.want {
			t.Errorf("write dynamic_events %q: exit %d\n got %q\nwant %q", tc.line, code, errs, tc.want)
		}
	}
	mustCLI(t, sock, "write", "dynamic_events", "-:myev u32 a; char[8] b")
	if de := dynamicEvents(t, sock); strings.Contains(de, "myev") {
		t.Errorf("the hinted delete left myev:\n%s", de)
	}
}
