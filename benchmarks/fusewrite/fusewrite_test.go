package fusewrite

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	r, err := Parse([]byte("enabled events=100 ns=2000 events/s=50000000 median_ns=18\ndisabled checks=10 ns=5 checks/s=2000000000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Enabled != (Phase{100, 2000, 18}) || r.Disabled != (Phase{10, 5, 0}) {
		t.Errorf("got %+v", r)
	}
	if r.Enabled.NanosPerOp() != 20 || r.Enabled.PerSecond() != 5e7 {
		t.Errorf("enabled: %v ns/op, %v/s; want 20 and 5e7", r.Enabled.NanosPerOp(), r.Enabled.PerSecond())
	}
	for _, bad := range []string{
		"",
		"enabled events=1 ns=1",
		"enabled events=1 ns=1 events/s=1",
		"enabled events=x ns=1 events/s=1 median_ns=1",
		"enabled checks=1 ns=1 checks/s=1 median_ns=1",
		"enabled events=1 ns=0 events/s=1 median_ns=0",
		"enabled events=1 ns=10 events/s=1 median=1",
		"enabled events=1 ns=10 events/s=1 median_ns=11",
		"enabled events=1 ns=1 events/s=1 median_ns=1\nenabled events=1 ns=1 events/s=1 median_ns=1",
		"disabled checks=1 ns=1 checks/s=1 median_ns=1",
		"other events=1 ns=1 events/s=1",
		"gcc: not found",
	} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Parse(%q): %v, want EINVAL", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("enabled events=100 ns=2000 events/s=50000000 median_ns=15\n"))
	f.Add([]byte("disabled checks=10 ns=5 checks/s=2000000000\n"))
	f.Add([]byte("enabled events=1 ns=1 events/s=1 median_ns=1\ndisabled checks=1 ns=1 checks/s=1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("error %v does not wrap EINVAL", err)
			}
			return
		}
		if r.Enabled.Count == 0 && r.Disabled.Count == 0 {
			t.Fatalf("no phase in %+v", r)
		}
		if r.Enabled.MedianNanos > r.Enabled.Nanos || r.Disabled.MedianNanos != 0 {
			t.Fatalf("medians out of place in %+v", r)
		}
	})
}

// TestBuild compiles the program and the null server, where gcc and a
// static C library are.
func TestBuild(t *testing.T) {
	for name, build := range map[string]func(string) error{"fusewrite": Build, "nullfuse": BuildNull} {
		if err := build(filepath.Join(t.TempDir(), name)); err != nil {
			if _, lookErr := exec.LookPath("gcc"); lookErr != nil {
				t.Skipf("no C toolchain: %v", err)
			}
			t.Fatal(err)
		}
	}
}
