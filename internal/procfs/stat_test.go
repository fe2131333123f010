package procfs

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	if comm, cpu, ok := ParseStat(fixture(t, "stat")); string(comm) != "a) b (c)" || cpu != 1 || !ok {
		t.Errorf("testdata/stat: %q, %d, %v", comm, cpu, ok)
	}
	// Fields 3 to 52 of a real stat line, processor (39) being 1.
	tail := " S 1 2 2 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123 4096 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	for _, c := range []struct {
		line, comm string
		cpu        int
		ok         bool
	}{
		{"42 (sleep)" + tail, "sleep", 1, true},
		{"42 (a) b (c))" + tail, "a) b (c)", 1, true},
		{"42 (x y)" + tail, "x y", 1, true},
		{"42 (short) S 1 2\n", "short", 0, true},
		{"42 (bad) S 1 2 2 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123 4096 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 x 0\n", "bad", 0, true},
		{"no parentheses", "", 0, false},
		{"42 )(", "", 0, false},
	} {
		comm, cpu, ok := ParseStat([]byte(c.line))
		if string(comm) != c.comm || cpu != c.cpu || ok != c.ok {
			t.Errorf("ParseStat(%q) = %q, %d, %v; want %q, %d, %v", c.line, comm, cpu, ok, c.comm, c.cpu, c.ok)
		}
	}
}

// TestParseStatSelf: this thread's own stat names its command and a CPU
// and a CPU.
func TestParseStatSelf(t *testing.T) {
	b, err := ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Comm(os.Getpid())
	comm, cpu, ok := ParseStat(b)
	if !ok || string(comm) != want || cpu < 0 {
		t.Errorf("ParseStat(%q) = %q, %d, %v", b, comm, cpu, ok)
	}
}

func BenchmarkParseStat(b *testing.B) {
	line := fixture(b, "stat")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := ParseStat(line); !ok {
			b.Fatal("not parsed")
		}
	}
}

func FuzzParseStat(f *testing.F) {
	addFixtures(f, "stat")
	f.Add([]byte("1 ((() R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		comm, _, ok := ParseStat(b)
		if ok && len(comm) > len(b) {
			t.Fatalf("comm %q longer than the input", comm)
		}
	})
}
