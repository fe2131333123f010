package main

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// --tracers takes users and @groups by number or name, and all.
func TestParseTracers(t *testing.T) {
	tr, err := parseTracers("0, root,1000,@0,@root,@4242")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.UIDs, []uint32{0, 0, 1000}) || !slices.Equal(tr.GIDs, []uint32{0, 0, 4242}) || tr.All {
		t.Errorf("parsed %+v", tr)
	}
	if tr, err := parseTracers("all"); err != nil || !tr.All {
		t.Errorf("all: %+v, %v", tr, err)
	}
	if tr, err := parseTracers(""); err != nil || tr.All || len(tr.UIDs)+len(tr.GIDs) != 0 {
		t.Errorf("empty: %+v, %v", tr, err)
	}
	for _, bad := range []string{"no-such-user-here", "@no-such-group-here", "-1", "@"} {
		if _, err := parseTracers(bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("--tracers %q: %v, want EINVAL", bad, err)
		}
	}
}
