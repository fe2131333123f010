package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// tracefs is the tracefs mount the generator works on.
type tracefs string

func (t tracefs) path(rel string) string { return filepath.Join(string(t), rel) }

// read returns a tracefs file's text, or "" if it cannot be read.
func (t tracefs) read(rel string) string {
	b, err := os.ReadFile(t.path(rel))
	if err != nil {
		return ""
	}
	return string(b)
}

// writeFile writes s to a tracefs file in one write(2) with the given
// extra open flags and returns the byte count and errno.
func (t tracefs) writeFile(rel string, flags int, s string) (int, error) {
	fd, err := unix.Open(t.path(rel), unix.O_WRONLY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if s == "" {
		return 0, nil
	}
	return unix.Write(fd, []byte(s))
}

// truncate opens a tracefs file with O_WRONLY|O_TRUNC and closes it:
// for dynamic_events that deletes every dynamic event, for trace it clears
// the buffer.
func (t tracefs) truncate(rel string) error {
	fd, err := unix.Open(t.path(rel), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// userLines returns the text of dynamic_events without its final newline.
// The VM has no kprobe, uprobe or synthetic events, so every line is a
// user event's "u:..." line, or the continuation of one whose name or field
// contains a newline (which a line filter would lose).
func (t tracefs) userLines() string {
	return strings.TrimSuffix(t.read("dynamic_events"), "\n")
}

const emptyStatus = "\nActive: 0\nBusy: 0\n"

func (t tracefs) clean() bool { return t.read("user_events_status") == emptyStatus }

// waitClean polls user_events_status every millisecond until no user event
// is left, for at most d. It reports whether that happened and how long it
// took.
func (t tracefs) waitClean(d time.Duration) (bool, time.Duration) {
	start := time.Now()
	for {
		if t.clean() {
			return true, time.Since(start)
		}
		if time.Since(start) > d {
			return false, time.Since(start)
		}
		time.Sleep(time.Millisecond)
	}
}

// truncDynamic deletes every (persistent, unused) dynamic event with an
// O_TRUNC open of dynamic_events, retrying on EBUSY for at most d (a
// persistent event is busy until the deferred put of its last enabler).
func (t tracefs) truncDynamic(d time.Duration) error {
	start := time.Now()
	for {
		err := t.truncate("dynamic_events")
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Since(start) > d {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// eventDir finds the tracefs directory of the event registered as name:
// events/user_events/<name>, or events/user_events_multi/<name>.<hexid>.
// Entries are matched exactly against a directory listing, so names with
// '/' or an empty name find nothing. It returns "" and a reason when there
// is no single match.
func (t tracefs) eventDir(name string, multi bool) (string, string) {
	sys := "user_events"
	if multi {
		sys = "user_events_multi"
	}
	ents, err := os.ReadDir(t.path("events/" + sys))
	if err != nil {
		return "", fmt.Sprintf("cannot list events/%s: %v", sys, err)
	}
	var found []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n := e.Name()
		if !multi {
			if n == name {
				found = append(found, n)
			}
			continue
		}
		id, ok := strings.CutPrefix(n, name+".")
		if ok && id != "" && strings.Trim(id, "0123456789abcdef") == "" {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 1:
		return "events/" + sys + "/" + found[0], ""
	case 0:
		return "", fmt.Sprintf("no directory for %q in events/%s", name, sys)
	default:
		return "", fmt.Sprintf("several directories for %q in events/%s: %q", name, sys, found)
	}
}

// traceReader reads what the trace buffer holds after a write: clear, write,
// then text. It works on bytes rather than lines, so a record whose string
// field contains a newline or a '#' comes back whole.
type traceReader struct {
	t tracefs
}

// clear empties the trace buffer.
func (r *traceReader) clear() error { return r.t.truncate("trace") }

// text returns the trace file after its "#" header, without the final
// newline.
func (r *traceReader) text() string {
	body := r.t.read("trace")
	for strings.HasPrefix(body, "#") {
		_, rest, ok := strings.Cut(body, "\n")
		if !ok {
			rest = ""
		}
		body = rest
	}
	return strings.TrimSuffix(body, "\n")
}
