package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// TestCLIFilter runs trace --filter and record --filter against a daemon:
// only the records that pass reach the output, the filter file is set back
// after the trace, and a refused filter shows the kernel's error text.
func TestCLIFilter(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	const cmdText = "flt_req u32 status; __rel_loc char[] path"
	_, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", cmdText)
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })

	follower, followOut := background(t, "--backend", "daemon", "--socket", sock, "trace", "-e", "flt_req", "--filter", `status >= 500 && path ~ "/api/*"`)
	testutil.Wait(t, "trace to set the filter", func() bool {
		return strings.Contains(mustCLI(t, sock, "cat", "events/user_events/flt_req/filter"), "status >= 500")
	})
	mustCLI(t, sock, "emit", cmdText, "--field", "status=200", "--field", "path=/api/a")
	mustCLI(t, sock, "emit", cmdText, "--field", "status=503", "--field", "path=/img/b")
	mustCLI(t, sock, "emit", cmdText, "--field", "status=504", "--field", "path=/api/c")
	testutil.Wait(t, "trace -e --filter to print the passing record", func() bool { return strings.Contains(followOut.String(), "path=/api/c") })
	if out := followOut.String(); strings.Contains(out, "path=/api/a") || strings.Contains(out, "path=/img/b") {
		t.Errorf("filtered records were printed:\n%s", out)
	}
	follower.Process.Signal(syscall.SIGINT)
	if err := follower.Wait(); err != nil {
		t.Errorf("trace after SIGINT: %v\n%s", err, followOut.String())
	}
	if out := mustCLI(t, sock, "cat", "events/user_events/flt_req/filter"); out != "none\n" {
		t.Errorf("filter after the trace: %q", out)
	}

	_, errs, code := cli(t, sock, "trace", "-e", "flt_req", "--filter", "x == 1")
	if code != 1 || !strings.Contains(errs, "(EINVAL)") || !strings.Contains(errs, "x == 1\n  ^\nparse_error: Field not found") {
		t.Errorf("refused filter: exit %d, %q", code, errs)
	}
	_, errs, code = cli(t, sock, "write", "events/user_events/flt_req/filter", "status < \"x\"")
	if code != 1 || !strings.Contains(errs, "the kernel says:\nstatus < \"x\"\n          ^\nparse_error: Illegal operation for field type") {
		t.Errorf("uetrace write of a refused filter: exit %d, %q", code, errs)
	}
	mustCLI(t, sock, "write", "events/user_events/flt_req/filter", "0")
	_, errs, code = cli(t, sock, "record", "--filter", "status == 1", "-e", "flt_req")
	if code == 0 || !strings.Contains(errs, "--filter must follow") {
		t.Errorf("--filter before -e: exit %d, %q", code, errs)
	}

	data := filepath.Join(t.TempDir(), "f.data")
	emit := testutil.Uetrace(t) + " --backend daemon --socket " + sock + " emit '" + cmdText + "' --field "
	mustCLI(t, sock, "record", "-q", "-e", "flt_req", "--filter", "status >= 500", "-o", data, "--",
		"sh", "-c", emit+"status=200 --field path=/x && "+emit+"status=500 --field path=/y")
	out := mustCLI(t, sock, "report", data)
	if !strings.Contains(out, "path=/y") || strings.Contains(out, "path=/x") {
		t.Errorf("record --filter report:\n%s", out)
	}
	_, errs, code = cli(t, sock, "record", "-q", "-e", "flt_req", "--filter", "status ==", "-o", data, "--duration", "1ms")
	if code != 1 || !strings.Contains(errs, "(EINVAL)") {
		t.Errorf("record with a refused filter: exit %d, %q", code, errs)
	}
	if out := mustCLI(t, sock, "top", "-e", "flt_req", "--filter", "status >= 500", "-n", "1", "-d", "10ms"); !strings.Contains(out, "event user_events:flt_req ") {
		t.Errorf("top --filter:\n%s", out)
	}
	_, errs, code = cli(t, sock, "top", "-e", "flt_req", "--filter", "status <", "-n", "1")
	if code != 1 || !strings.Contains(errs, "(EINVAL)") {
		t.Errorf("top with a refused filter: exit %d, %q", code, errs)
	}
}
