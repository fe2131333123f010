package conform

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/uetrace/uetrace/internal/vmtest"
)

// Differential runs the scenario files under dirs on every backend — the
// kernel inside the VM, the daemon and in-process on this machine — each in
// a static build of cmd/ueconform, and compares. kernelResults, if not "",
// is a file of kernel results to use instead of booting the VM.
func Differential(dirs []string, kernelResults string) (kernel *Results, backends map[string]*Results, err error) {
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
	if err := vmtest.Build("./cmd/ueconform", bin); err != nil {
		return nil, nil, err
	}
	// Every backend reads the same files: a copy, named as the VM sees it.
	files := map[string]string{"ueconform": bin}
	var guestDirs []string
	for i, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			return nil, nil, err
		}
		g := fmt.Sprintf("s%d", i)
		if !st.IsDir() {
			files[filepath.Join(g, filepath.Base(d))] = d
			guestDirs = append(guestDirs, filepath.Join(g, filepath.Base(d)))
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(d, "*.scn"))
		for _, m := range matches {
			files[filepath.Join(g, filepath.Base(m))] = m
		}
		guestDirs = append(guestDirs, g)
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
		res, err := vmtest.Run(context.Background(), vmtest.Options{Files: files, Timeout: 30 * time.Minute},
			append([]string{"./ueconform", "-backend", "kernel"}, guestDirs...)...)
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
		cmd := exec.Command(bin, append([]string{"-backend", b}, dirs...)...)
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
