package procfs

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseComm(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"comm", "uetrace serve"},
		{"comm-newline", "a\nb"}, // PR_SET_NAME takes a newline too: only the last goes
	} {
		if got := ParseComm(fixture(t, c.file)); got != c.want {
			t.Errorf("%s: %q, want %q", c.file, got, c.want)
		}
	}
	if got := ParseComm(nil); got != "" {
		t.Errorf("empty: %q", got)
	}
}

func TestComm(t *testing.T) {
	want, _ := os.ReadFile("/proc/self/comm")
	got, err := Comm(os.Getpid())
	if err != nil || got+"\n" != string(want) {
		t.Errorf("Comm(self) = %q, %v; want %q", got, err, want)
	}
	tid := unix.Gettid()
	if got, err := ThreadComm(os.Getpid(), tid); err != nil || got == "" {
		t.Errorf("ThreadComm(self, %d) = %q, %v", tid, got, err)
	}
	if _, err := ThreadComm(os.Getpid(), 1); err == nil && os.Getpid() != 1 {
		t.Error("ThreadComm of another process's thread: no error")
	}
}

func FuzzParseComm(f *testing.F) {
	addFixtures(f, "comm", "comm-newline")
	f.Fuzz(func(t *testing.T, b []byte) {
		got := ParseComm(b)
		if got != string(b) && got+"\n" != string(b) {
			t.Fatalf("ParseComm(%q) = %q: more than the last newline taken", b, got)
		}
		if strings.HasSuffix(string(b), "\n") == (got == string(b)) {
			t.Fatalf("ParseComm(%q) = %q: the last newline kept", b, got)
		}
	})
}
