package subsys

import (
	"bufio"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Issue 28, item 6: an event whose name no directory entry can have
// (" u32 a" registers one with an empty name) stops eventfs's listing of
// its system where it stands, as testdata/readdir-unlistable-6.12.txt
// shows Linux 6.12 does: the entries before it, then EIO. The tree listed
// nothing, failing the whole directory.
func TestReadDirUnlistableGolden(t *testing.T) {
	f, err := os.Open("testdata/readdir-unlistable-6.12.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wantList, wantAvail []string
	var wantErr string
	want2 := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), ": ")
		switch kind {
		case "getdents":
			if e, ok := strings.CutPrefix(rest, "error "); ok {
				wantErr = e
				continue
			}
			for _, n := range strings.Fields(rest) {
				if n != "." && n != ".." { // FUSE and the socket add the dots
					wantList = append(wantList, n)
				}
			}
		case "available":
			wantAvail = append(wantAvail, rest)
		case "dynamic_events", "user_events_status":
			want2[kind] += strings.TrimPrefix(rest, "|") + "\n"
		}
	}
	e := newEnv(t)
	file := e.s.Open()
	defer file.Close()
	for i, cmd := range []string{"ok_first u32 a", " u32 a", "ok_after u32 a", "a/b u32 a", ".. u32 a"} {
		if _, err := e.reg(file, cmd, uint8(i), 0); err != nil {
			t.Fatalf("register %q: %v", cmd, err)
		}
	}
	ents, err := e.s.FS().ReadDir("events/user_events")
	var got []string
	for _, d := range ents {
		got = append(got, d.Name)
	}
	if !slices.Equal(got, wantList) || wantErr != "EIO" || !errors.Is(err, unix.EIO) {
		t.Errorf("ReadDir(events/user_events) = %q, %v; Linux lists %q, then %s", got, err, wantList, wantErr)
	}
	avail := strings.Split(strings.TrimSuffix(e.read("available_events"), "\n"), "\n")
	slices.Sort(avail)
	if !slices.Equal(avail, wantAvail) {
		t.Errorf("available_events:\n got %q\nwant %q", avail, wantAvail)
	}
	if _, err := e.s.FS().ReadDir("events/user_events/ok_after"); err != nil {
		t.Errorf("ok_after's directory, after the unlistable name: %v", err)
	}
	// No path reaches the events named "" or "..": the VFS makes "//"
	// one '/' and ".." the parent (events/user_events//id is
	// events/user_events/id, which does not exist).
	for _, p := range []string{"events/user_events//id", "events/user_events/../id"} {
		if b, err := e.s.FS().ReadFile(p, root); !errors.Is(err, unix.ENOENT) {
			t.Errorf("read %s: %q, %v; want ENOENT", p, b, err)
		}
	}
	// With the empty name first, as the producer did, nothing but
	// the two files is listed: ok_ev, made after it, is left out.
	e = newEnv(t)
	file2 := e.s.Open()
	defer file2.Close()
	e.reg(file2, " u32 a", 0, 0)
	e.reg(file2, "ok_ev u32 a", 1, 0)
	ents, err = e.s.FS().ReadDir("events/user_events")
	got = got[:0]
	for _, d := range ents {
		got = append(got, d.Name)
	}
	if !slices.Equal(got, []string{"filter", "enable"}) || !errors.Is(err, unix.EIO) {
		t.Errorf("an empty name first: ReadDir = %q, %v; Linux lists filter enable, then EIO", got, err)
	}
	for _, file := range []string{"dynamic_events", "user_events_status"} {
		if got := e.read(file); got != want2[file] || got == "" {
			t.Errorf("an empty name first: %s:\n got %q\nwant %q", file, got, want2[file])
		}
	}
}
