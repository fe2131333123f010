package usereventstest_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/userevents"
	"github.com/uetrace/uetrace/userevents/usereventstest"
)

// A session enables what it attaches to, and hands over each record as
// perf's raw data: the common header, then the payload written.
func TestSession(t *testing.T) {
	k := usereventstest.NewKernel(&usereventstest.Options{NumCPU: 2})
	f, err := userevents.Open(k.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("ut_session u32 n", 0)
	if err != nil {
		t.Fatal(err)
	}
	multi, err := f.Register("ut_session_m u64 v", userevents.MultiFormat)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Enabled() {
		t.Fatal("enabled before any session")
	}
	ss, err := k.NewSession("user_events*:ut_session*")
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Enabled() || !multi.Enabled() {
		t.Fatal("not enabled by the session")
	}
	if err := ev.Write(binary.NativeEndian.AppendUint32(nil, 7)); err != nil {
		t.Fatal(err)
	}
	if err := multi.Write(binary.NativeEndian.AppendUint64(nil, 9)); err != nil {
		t.Fatal(err)
	}
	recs := ss.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(recs), recs)
	}
	if r := recs[0]; r.System != "user_events" || r.Name != "ut_session" || binary.NativeEndian.Uint32(r.Payload()) != 7 || r.PID != int32(os.Getpid()) || r.TID == 0 {
		t.Errorf("first record %+v", r)
	}
	if r := recs[1]; r.System != "user_events_multi" || !strings.HasPrefix(r.Name, "ut_session_m.") || binary.NativeEndian.Uint64(r.Payload()) != 9 {
		t.Errorf("second record %+v", r)
	}
	if len(ss.Records()) != 0 || ss.Lost() != 0 {
		t.Error("records read twice, or lost")
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if ev.Enabled() {
		t.Error("still enabled after the session closed")
	}
	if _, err := k.NewSession("["); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a bad pattern: %v, want EINVAL", err)
	}
}

// The tree reads as the kernel's, and the in-process kernel's enable bit
// follows its enable file.
func TestTracefs(t *testing.T) {
	k := usereventstest.NewKernel(nil)
	f, err := userevents.Open(k.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Backend() != userevents.Other {
		t.Errorf("backend %v, want other", f.Backend())
	}
	ev, err := f.Register("ut_tree u32 n", 0)
	if err != nil {
		t.Fatal(err)
	}
	fs := k.Tracefs()
	if err := fs.WriteFile("events/user_events/ut_tree/enable", []byte("1"), os.O_TRUNC); err != nil {
		t.Fatal(err)
	}
	if !ev.Enabled() {
		t.Fatal("the enable file did not set the bit")
	}
	status, err := fs.ReadFile("user_events_status")
	if err != nil || !strings.Contains(string(status), "ut_tree # Used by ftrace") {
		t.Errorf("status %q, %v", status, err)
	}
	if _, err := f.Register("ut_tree u64 n", 0); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("another format: %v, want EADDRINUSE", err)
	}
}
