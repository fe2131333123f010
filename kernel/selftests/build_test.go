package selftests

import (
	"debug/elf"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBuild builds the selftests and the example, checks they are static
// executables, and that a second Build leaves them alone.
func TestBuild(t *testing.T) {
	if err := Available(); err != nil {
		if os.Getenv("UETRACE_VMTEST") == "require" {
			t.Fatalf("%v (UETRACE_VMTEST=require)", err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := Build(dir); err != nil {
		t.Fatal(err)
	}
	names := []string{Example}
	for _, b := range Binaries {
		names = append(names, b.Name)
	}
	mtimes := map[string]time.Time{}
	for _, name := range names {
		path := filepath.Join(dir, name)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked; the VM has no libc", name)
			}
		}
		f.Close()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		mtimes[name] = fi.ModTime()
	}
	// The extracted sources are unmodified: build.sh compiles what it
	// extracted, and the uapi header it installed is there.
	for _, p := range []string{
		"src/tools/testing/selftests/user_events/abi_test.c",
		"src/tools/testing/selftests/kselftest_harness.h",
		"src/samples/user_events/example.c",
		"include/linux/user_events.h",
	} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}

	if err := Build(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(mtimes[name]) {
			t.Errorf("a second Build rebuilt %s, which was up to date", name)
		}
	}
}
