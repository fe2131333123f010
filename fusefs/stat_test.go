package fusefs

import (
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	rest := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 3 37 38\n"
	for _, c := range []struct {
		text string
		comm string
		cpu  int
	}{
		{"42 (sh)" + rest, "sh", 3},
		{"42 (a) b (c))" + rest, "a) b (c)", 3},
		{"42 (x)", "x", 0},
		{"42 x)", "", 0},
		{")(", "", 0},
		{"42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 -1", "x", 0},
	} {
		comm, cpu := parseStat(c.text)
		if comm != c.comm || cpu != c.cpu {
			t.Errorf("parseStat(%q) = %q, %d; want %q, %d", c.text, comm, cpu, c.comm, c.cpu)
		}
	}
	// This process's own.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	if comm, _ := parseStat(string(b)); !strings.HasPrefix("fusefs.test", comm) {
		t.Errorf("own comm %q", comm)
	}
}

// A process names itself (prctl PR_SET_NAME): comm is hostile input.
func FuzzParseStat(f *testing.F) {
	f.Add("42 (sh) S 1 2 3")
	f.Add("42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 3")
	f.Fuzz(func(t *testing.T, s string) {
		comm, cpu := parseStat(s)
		if cpu < 0 || cpu >= 1<<16 || len(comm) > len(s) {
			t.Fatalf("parseStat(%q) = %q, %d", s, comm, cpu)
		}
	})
}
