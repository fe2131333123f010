package main

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

func TestCLIVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testutil.Uetrace(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	out2, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(out2) {
		t.Errorf("--version %q, version %q", out, out2)
	}
	// What `go version -m` reads from the binary is what it must say.
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "uetrace "
	var rev, modified, goVersion string
	for i, line := range strings.Split(string(info), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		switch {
		case i == 0:
			_, goVersion, _ = strings.Cut(line, ": ")
		case len(f) >= 3 && f[0] == "mod":
			want += f[2]
		case len(f) == 2 && f[0] == "build":
			if v, ok := strings.CutPrefix(f[1], "vcs.revision="); ok {
				rev = v
			}
			if v, ok := strings.CutPrefix(f[1], "vcs.modified="); ok {
				modified = v
			}
		}
	}
	if rev != "" {
		want += " rev " + rev[:12]
		if modified == "true" {
			want += " (modified)"
		}
	}
	want += " " + strings.TrimSpace(goVersion) + "\n"
	if string(out) != want {
		t.Errorf("--version %q, want %q (from go version -m)", out, want)
	}
}

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}}
	if got := versionOf(bi); got != "uetrace (devel) go1.26.1" {
		t.Errorf("no VCS: %q", got)
	}
	bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "abc1234def567890"}, {Key: "vcs.modified", Value: "true"}}
	if got := versionOf(bi); got != "uetrace (devel) rev abc1234def56 (modified) go1.26.1" {
		t.Errorf("modified: %q", got)
	}
	bi.Main.Version, bi.Settings[1].Value = "v1.2.3", "false"
	if got := versionOf(bi); got != "uetrace v1.2.3 rev abc1234def56 go1.26.1" {
		t.Errorf("release: %q", got)
	}
}
