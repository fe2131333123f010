package procfs

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"\n", nil},
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{"0-1,4,6-7", []int{0, 1, 4, 6, 7}},
		{string(fixture(t, "cpu-online")), []int{0, 1, 4, 6, 7}},
	} {
		got, err := ParseCPUList(tc.in)
		if err != nil {
			t.Errorf("ParseCPUList(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(tc.want, got) {
			t.Errorf("ParseCPUList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got, err := ParseCPUList(string(fixture(t, "cpu-possible"))); err != nil || len(got) != 64 || MaxCPU(got) != 63 {
		t.Errorf("cpu-possible: %v, %v", got, err)
	}
	for _, bad := range []string{"x", "1-", "3-1", "-1", "0,,1", "0-99999999"} {
		if _, err := ParseCPUList(bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("ParseCPUList(%q) = %v, want EINVAL", bad, err)
		}
	}
	if MaxCPU(nil) != -1 || MaxCPU([]int{3, 9, 1}) != 9 {
		t.Error("MaxCPU")
	}
}

// TestCPUs: this machine's lists, each within the next: allowed ≤ online ⊆
// present ⊆ possible.
func TestCPUs(t *testing.T) {
	online, err := OnlineCPUs()
	if err != nil {
		t.Skipf("no /sys/devices/system/cpu here: %v", err)
	}
	present, err1 := PresentCPUs()
	possible, err2 := PossibleCPUs()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if len(online) == 0 {
		t.Fatal("no CPU online")
	}
	for _, c := range online {
		if !slices.Contains(present, c) || !slices.Contains(possible, c) {
			t.Errorf("online CPU %d is not present (%v) or possible (%v)", c, present, possible)
		}
	}
	if n := AllowedCPUs(); n < 1 || n > len(online) || n != runtime.NumCPU() {
		t.Errorf("AllowedCPUs() = %d; %d online, runtime.NumCPU %d", n, len(online), runtime.NumCPU())
	}
}

func FuzzParseCPUList(f *testing.F) {
	f.Add("0-3,8")
	for _, name := range []string{"cpu-online", "cpu-possible"} {
		f.Add(string(fixture(f, name)))
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err == nil && len(cpus) > 1<<20 {
			t.Fatalf("%d cpus from %q", len(cpus), s)
		}
		for _, c := range cpus {
			if c < 0 {
				t.Fatalf("CPU %d from %q", c, s)
			}
		}
	})
}
