package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// TestDebianPackage builds the Debian package as dist/README.md says —
// nfpm, a Go packaging tool, from dist/nfpm.yaml — installs it with
// dpkg -i into a root of its own (dpkg --root: the machine's own files
// are not touched; the maintainer scripts run chrooted there, under
// busybox's sh, and find no systemd), runs the installed daemon and serves
// a client with the installed uetrace, and purges it: nothing of it left.
func TestDebianPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and a package")
	}
	testutil.NeedRoot(t, "dpkg --root installs as root")
	nfpm := os.Getenv("UETRACE_NFPM")
	if nfpm == "" {
		var err error
		if nfpm, err = exec.LookPath("nfpm"); err != nil {
			t.Skip("no nfpm (go install github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.43.0, as .ci/run does)")
		}
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	work := t.TempDir()
	bin := filepath.Join(work, "uetrace")
	run(".", nil, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	run("../..", []string{"UETRACE_BIN=" + bin, "UETRACE_VERSION=0.0.0~test"},
		nfpm, "pkg", "--config", "dist/nfpm.yaml", "--packager", "deb", "--target", work)
	deb := filepath.Join(work, "uetrace_0.0.0~test_amd64.deb")
	info := run(".", nil, "dpkg-deb", "--info", deb)
	for _, want := range []string{"Package: uetrace", "Architecture: amd64", "License: MIT"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info: no %q\n%s", want, info)
		}
	}

	// A root of its own with an empty dpkg database and a shell for the
	// maintainer scripts.
	root := filepath.Join(work, "root")
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "bin", "tmp"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644)
	busybox, _ := exec.LookPath("busybox")
	run(".", nil, "cp", busybox, filepath.Join(root, "bin/busybox"))
	os.Symlink("busybox", filepath.Join(root, "bin/sh"))
	// Without systemd nothing runs: postinst says how to start the
	// daemon (a newcomer's dpkg -i in a container was silent, and then
	// every command said no daemon was there).
	if out := run(".", nil, "dpkg", "--root="+root, "-i", deb); !strings.Contains(out, "systemd does not run this machine, so no daemon was started: run 'uetrace serve'") {
		t.Errorf("dpkg -i without systemd says nothing of how to start the daemon:\n%s", out)
	}
	files := []string{"usr/bin/uetrace", "lib/systemd/system/uetrace.socket", "lib/systemd/system/uetrace.service",
		"usr/share/man/man1/uetrace-record.1", "usr/share/man/man1/uetrace-serve.1", "usr/share/doc/uetrace/copyright"}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("installed: %v", err)
		}
	}

	// The installed daemon serves the installed client.
	installed := filepath.Join(root, "usr/bin/uetrace")
	sock := filepath.Join(work, "uetrace.sock")
	srv := exec.Command(installed, "serve", "--socket", sock)
	var log testutil.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Wait(t, "the installed daemon to listen", func() bool { _, err := os.Stat(sock); return err == nil })
	out := run(".", nil, installed, "--backend", "daemon", "--socket", sock, "status")
	if !strings.Contains(out, "Active: 0") {
		t.Errorf("the installed uetrace's status:\n%s", out)
	}
	srv.Process.Kill()
	srv.Wait()

	run(".", nil, "dpkg", "--root="+root, "--purge", "uetrace")
	var left []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err == nil && !d.IsDir() && !strings.HasPrefix(rel, "var/lib/dpkg") && !strings.HasPrefix(rel, "bin/") {
			left = append(left, rel)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left after dpkg --purge: %q", left)
	}
}
