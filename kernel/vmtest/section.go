package vmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// RunProgram builds the main package pkg statically as /test/name (the
// name is its comm in the guest's traces) and runs it in a guest with args,
// as opts describe; opts.Files (guest name → host path) are copied beside
// it. It fails t if the guest does not run the program to an exit status
// of 0, and logs the output either way.
func RunProgram(t testing.TB, pkg, name string, opts Options, args ...string) *Result {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if err := Build(pkg, bin); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{name: bin}
	for k, v := range opts.Files {
		all[k] = v
	}
	opts.Files = all
	ctx, cancel := TestContext(t)
	defer cancel()
	res, err := Run(ctx, opts, append([]string{"./" + name}, args...)...)
	if err != nil {
		if res != nil {
			t.Logf("output:\n%s", res.Output)
		}
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s exited with status %d in the VM:\n%s", name, res.ExitCode, res.Output)
	}
	return res
}

// TestContext is the context for a run inside test t: done when t ends, and
// a minute before the test binary's deadline (go test -timeout), so that a
// guest too slow for it fails t with its console instead of the binary
// panicking. A run's own Timeout (default 10 minutes) still applies; under
// TCG emulation on a loaded machine a run can take several times as long as
// on a quiet one, so tests leave the deadline to go test.
func TestContext(t testing.TB) (context.Context, context.CancelFunc) {
	ctx := context.Background()
	if c, ok := t.(interface{ Context() context.Context }); ok {
		ctx = c.Context()
	}
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			return context.WithDeadline(ctx, dl.Add(-time.Minute))
		}
	}
	return context.WithCancel(ctx)
}

// Section finds, in a program's output, the bytes it printed between a line
// "@@NAME-BEGIN@@" and a line "@@NAME-END <sha256 of the bytes>@@", and
// checks the checksum; rest is the output without the section (what the
// program said besides).
func Section(out []byte, name string) (body, rest []byte, err error) {
	begin := []byte("@@" + name + "-BEGIN@@\n")
	i := bytes.Index(out, begin)
	if i < 0 || (i > 0 && out[i-1] != '\n') {
		return nil, out, fmt.Errorf("no line %q in the output", begin[:len(begin)-1])
	}
	after := out[i+len(begin):]
	m := regexp.MustCompile(`(?m)^@@` + regexp.QuoteMeta(name) + `-END ([0-9a-f]{64})@@\n`).FindSubmatchIndex(after)
	if m == nil {
		return nil, out, fmt.Errorf("no line \"@@%s-END <sha256>@@\" after the section", name)
	}
	body = after[:m[0]]
	rest = append(append([]byte{}, out[:i]...), after[m[1]:]...)
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != string(after[m[2]:m[3]]) {
		return nil, rest, fmt.Errorf("the section's SHA-256 is not the one after it: %d bytes corrupted on the way", len(body))
	}
	return body, rest, nil
}
