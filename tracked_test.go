package uetrace_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoBinaryTracked keeps built programs out of git: the repository holds
// sources and the data its tests read, and `go build` or `go generate`
// makes the rest. An object that must be carried (as cilium/ebpf commits
// what bpf2go builds) is named in carried, with the test that checks it is
// what its source builds.
func TestNoBinaryTracked(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (git ls-files: %v)", err)
	}
	carried := map[string]bool{
		// The interposer, which uetrace embeds so that building it needs
		// no C compiler: internal/preload's TestCommittedObject checks it
		// is what go generate builds from its source.
		"internal/preload/libuetrace-preload_amd64.so": true,
	}
	// Executable and object formats by their magic: ELF, Mach-O (both
	// byte orders, 32 and 64 bits, universal), PE/COFF.
	magics := [][]byte{
		[]byte("\x7fELF"),
		{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
		{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
		{0xca, 0xfe, 0xba, 0xbe},
		[]byte("MZ"),
	}
	const maxSize = 2 << 20 // no source or fixture of this repository is near it
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name == "" || carried[name] {
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			continue // deleted in the work tree and not yet committed
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		st, _ := f.Stat()
		f.Close()
		for _, m := range magics {
			if bytes.HasPrefix(head[:n], m) {
				t.Errorf("%s is a built binary (starts %q): remove it from git (git rm --cached) and let the build make it", name, head[:n])
				break
			}
		}
		if st != nil && st.Size() > maxSize {
			t.Errorf("%s is %d bytes: no source or test fixture should be that large", name, st.Size())
		}
	}
}
