package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// shellVerbs are the steps a shell can take with echo, cat, ls and test:
// scenarios made of nothing else run on the shell backend.
var shellVerbs = map[string]bool{"echo": true, "cat": true, "ls": true, "exists": true}

// shellOnly reports whether every step of a scenario is a shell step.
func shellOnly(steps []Step) bool {
	for _, st := range steps {
		if !shellVerbs[st.Verb] {
			return false
		}
	}
	return true
}

// shell is a bash, started by the caller (under uetrace run, say) with its
// standard input and output given here, that takes a scenario's file steps
// as echo, cat, ls and test commands on /sys/kernel/tracing — what a person
// at a terminal types. Its answers come back framed by a random token; the
// errno of a failed command is read back from bash's message (strerror).
type shell struct {
	in    io.Writer
	out   *bufio.Reader
	token string
}

func newShell(in io.Writer, out io.Reader) *shell {
	var b [8]byte
	rand.Read(b[:])
	return &shell{in: in, out: bufio.NewReader(out), token: "@@" + hex.EncodeToString(b[:])}
}

// run has bash run cmd, with its stderr kept aside, and returns cmd's
// standard output, its status and its error message.
func (s *shell) run(cmd string) (out []byte, status int, msg string, err error) {
	errs := "/tmp/.uetrace-shell-" + s.token[2:]
	script := fmt.Sprintf("{ %s ; } 2>%s; r=$?; echo; echo %s $r; cat %s; rm -f %s; echo %s\n", cmd, errs, s.token, errs, errs, s.token)
	if _, err := io.WriteString(s.in, script); err != nil {
		return nil, 0, "", err
	}
	var buf bytes.Buffer
	for {
		line, err := s.out.ReadBytes('\n')
		buf.Write(line)
		if err != nil {
			return nil, 0, "", fmt.Errorf("shell: %w (so far %q)", err, buf.String())
		}
		if bytes.HasPrefix(line, []byte(s.token+" ")) {
			break
		}
	}
	b := buf.Bytes()
	i := bytes.LastIndex(b, []byte("\n"+s.token+" "))
	if i < 0 {
		return nil, 0, "", fmt.Errorf("shell: no frame in %q", b)
	}
	status, _ = strconv.Atoi(strings.TrimSpace(string(b[i+1+len(s.token)+1:])))
	out = b[:i]
	var m bytes.Buffer
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			return nil, 0, "", fmt.Errorf("shell: %w", err)
		}
		if string(line) == s.token+"\n" {
			break
		}
		m.Write(line)
	}
	return out, status, strings.TrimSpace(m.String()), nil
}

// shellQuote quotes p for bash.
func shellQuote(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }

// errnoOfMessage reads the errno from a message ending in strerror's text,
// as bash, cat and ls print one ("...: Device or resource busy").
func errnoOfMessage(msg string) error {
	last := msg
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		last = msg[i+2:]
	}
	for e := unix.Errno(1); e < 256; e++ {
		if strings.EqualFold(e.Error(), last) {
			return e
		}
	}
	return fmt.Errorf("shell: %q", msg)
}

// shellFS is the tracefs the shell sees.
type shellFS struct{ sh *shell }

func (f shellFS) read(p string) ([]byte, error) {
	out, status, msg, err := f.sh.run("cat " + shellQuote(p))
	if err != nil {
		return nil, err
	}
	if status != 0 {
		return nil, errnoOfMessage(msg)
	}
	return out, nil
}

// write writes data as a shell can in one write(2): bash's echo -ne, every
// byte escaped, into a file (bash writes its output line by line), and cat
// of that file to the tracefs file opened with > (O_TRUNC) or >> (O_APPEND),
// which cat writes as it read it, at once.
func (f shellFS) write(p string, flag int, data []byte) (int, error) {
	redirect := ">"
	if flag&unix.O_APPEND != 0 {
		redirect = ">>"
	}
	var cmd string
	if len(data) == 0 {
		// Nothing to write: the redirection alone opens the file.
		cmd = ": " + redirect + " " + shellQuote(p)
	} else {
		var esc strings.Builder
		for _, c := range data {
			fmt.Fprintf(&esc, `\x%02x`, c)
		}
		in := "/tmp/.uetrace-shell-" + f.sh.token[2:] + ".in"
		cmd = "echo -ne '" + esc.String() + "' > " + in + " && cat " + in + " " + redirect + " " + shellQuote(p) + "; r=$?; rm -f " + in + "; (exit $r)"
	}
	_, status, msg, err := f.sh.run(cmd)
	if err != nil {
		return 0, err
	}
	if status != 0 {
		return 0, errnoOfMessage(msg)
	}
	return len(data), nil
}

func (f shellFS) readDir(p string) ([]string, error) {
	out, status, msg, err := f.sh.run("ls -1 " + shellQuote(p))
	if err != nil {
		return nil, err
	}
	if status != 0 {
		return nil, errnoOfMessage(msg)
	}
	return strings.Fields(string(out)), nil
}

func (f shellFS) exists(p string) bool {
	_, status, _, err := f.sh.run("test -e " + shellQuote(p))
	return err == nil && status == 0
}

// shellProc is a process that has only the shell: every step but the file
// steps is unsupported.
type shellProc struct{ sh *shell }

func (p shellProc) open(int) (dataFile, error)              { return nil, errUnsupported }
func (p shellProc) fs() fileSystem                          { return shellFS(p) }
func (p shellProc) page() []byte                            { return make([]byte, 4096) }
func (p shellProc) base() uint64                            { return 0 }
func (p shellProc) special(string) (uint64, bool)           { return 0, false }
func (p shellProc) perf(string, string) (perfReader, error) { return nil, errUnsupported }
func (p shellProc) protect(bool) error                      { return errUnsupported }
func (p shellProc) child([]Step) ([]byte, error)            { return nil, errUnsupported }
func (p shellProc) exit()                                   {}

// RunShell runs each scenario made only of echo, cat, ls and exists steps
// in a bash started by start — which must run it with /sys/kernel/tracing as
// the tree under test, e.g. `uetrace run --private -- bash` — one bash per
// scenario, in a tracefs nothing else uses, and writes results as Run does.
// Other scenarios are left out; it returns how many ran.
func RunShell(ctx context.Context, start func(ctx context.Context) *exec.Cmd, scenarios []*Scenario, w io.Writer) (int, error) {
	ran := 0
	for _, sc := range scenarios {
		if !shellOnly(sc.Steps) {
			continue
		}
		raw, err := runShellScenario(ctx, start, sc)
		if err != nil {
			return ran, fmt.Errorf("%s: %w", sc.Name, err)
		}
		fmt.Fprintf(w, "=== %s\n%s", sc.Name, normalise(raw, multiNames(sc.Steps)))
		ran++
	}
	return ran, nil
}

func runShellScenario(ctx context.Context, start func(ctx context.Context) *exec.Cmd, sc *Scenario) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := start(ctx)
	cmd.WaitDelay = 10 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	sh := newShell(in, out)
	var raw bytes.Buffer
	if _, _, _, err := sh.run("cd /sys/kernel/tracing"); err != nil {
		in.Close()
		cmd.Wait()
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	runSteps(shellProc{sh}, sc.Steps, &raw)
	in.Close()
	if err := cmd.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return "", fmt.Errorf("the shell: %w: %s", err, stderr.String())
	}
	return raw.String(), nil
}
