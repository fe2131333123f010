package uetrace_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTypedGenerated checks that the typed event types of arity 1 to 6
// committed in userevents and eventheader/ehprovider are what
// internal/gentyped writes from its templates: a hand edit of typedn.go is
// lost at the next `go generate`, so it must go into the template.
func TestTypedGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with go run")
	}
	for _, c := range []struct{ pkg, file string }{
		{"userevents", "userevents/typedn.go"},
		{"ehprovider", "eventheader/ehprovider/typedn.go"},
	} {
		out, err := exec.Command("go", "run", "./internal/gentyped/gentyped.go", "-pkg", c.pkg, "-o", "-").Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("go run internal/gentyped -pkg %s: %v\n%s", c.pkg, err, stderr)
		}
		have, err := os.ReadFile(filepath.FromSlash(c.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, have) {
			t.Errorf("%s is not what internal/gentyped writes: run go generate ./%s", c.file, filepath.Dir(c.file))
		}
	}
}
