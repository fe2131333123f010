package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// Differential runs the scenario files under dirs on every backend — the
// kernel inside the VM; the daemon, in-process subsys and the FUSE tree on
// this machine — each in a static build of conformance/cmd/ueconform, and
// compares. kernelResults, if not "", is a file of kernel results to use
// instead of booting the VM. A backend Unavailable on this machine (fuse,
// when not root) has no results: the caller says why. ctx bounds the runs
// (a test passes vmtest.TestContext, so a guest too slow for its deadline
// fails it with the console, and a hung backend is killed).
func Differential(ctx context.Context, dirs []string, kernelResults string) (kernel *Results, backends map[string]*Results, err error) {
	// Load first: a scenario with a syntax error fails here, not in the VM.
	if _, err := Load(dirs...); err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "ueconform-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "ueconform")
	if err := vmtest.Build("./conformance/cmd/ueconform", bin); err != nil {
		return nil, nil, err
	}
	// Every backend runs a snapshot of the files, taken now: the VM gets
	// it as /test/scenarios, this machine's runs read it from tmp.
	snap := filepath.Join(tmp, "scenarios")
	if err := os.Mkdir(snap, 0o755); err != nil {
		return nil, nil, err
	}
	files := map[string]string{"ueconform": bin}
	for _, d := range dirs {
		matches := []string{d}
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			matches, _ = filepath.Glob(filepath.Join(d, "*.scn"))
		}
		for _, m := range matches {
			data, err := os.ReadFile(m)
			if err != nil {
				return nil, nil, err
			}
			dst := filepath.Join(snap, filepath.Base(m))
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return nil, nil, err
			}
			files["scenarios/"+filepath.Base(m)] = dst
		}
	}

	if kernelResults != "" {
		data, err := os.ReadFile(kernelResults)
		if err != nil {
			return nil, nil, err
		}
		kernel, err = ParseResults(bytes.NewReader(data))
		if err != nil {
			return nil, nil, err
		}
	} else {
		res, err := vmtest.Run(ctx, vmtest.Options{Files: files},
			"./ueconform", "-backend", "kernel", "scenarios")
		if err != nil {
			return nil, nil, err
		}
		if res.ExitCode != 0 {
			return nil, nil, fmt.Errorf("ueconform in the VM exited %d:\n%s", res.ExitCode, res.Output)
		}
		kernel, err = ParseResults(bytes.NewReader(res.Output))
		if err != nil {
			return nil, nil, err
		}
	}

	backends = map[string]*Results{}
	for _, b := range Backends[1:] {
		if Unavailable(b) != nil {
			continue
		}
		args := []string{"-backend", b}
		if b == "fuse" {
			uetrace := filepath.Join(tmp, "uetrace")
			if err := vmtest.Build("github.com/uetrace/uetrace/cmd/uetrace", uetrace); err != nil {
				return nil, nil, err
			}
			args = append(args, "-uetrace", uetrace)
		}
		cmd := exec.CommandContext(ctx, bin, append(args, snap)...)
		killGroup(cmd)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, nil, fmt.Errorf("ueconform -backend %s: %v: %s", b, err, stderr.Bytes())
		}
		if backends[b], err = ParseResults(bytes.NewReader(out)); err != nil {
			return nil, nil, err
		}
	}
	return kernel, backends, nil
}
