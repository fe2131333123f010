package ehprovider_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// backend is a userevents backend with the subsystem behind it, so that a
// test can read what was written.
type backend struct {
	name string
	sys  *subsys.Subsystem
	opts userevents.Options
}

func backends(t *testing.T) []backend {
	isys := subsys.New(subsys.Options{NumCPU: 2})
	dsys := subsys.New(subsys.Options{NumCPU: 2})
	sock := startDaemon(t, daemon.Config{Subsystem: dsys})
	return []backend{
		{"inprocess", isys, userevents.Options{OpenData: inproc.New(isys).OpenData}},
		{"daemon", dsys, userevents.Options{Backend: userevents.Daemon, Socket: sock}},
		{"daemon-socket", dsys, userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.SocketTransport}},
	}
}

// startDaemon serves sys on a socket in a temporary directory until the
// test ends (as userevents' tests do).
func startDaemon(t *testing.T, cfg daemon.Config) string {
	t.Helper()
	cfg.Logger = nil // discarded
	return daemontest.Start(t, cfg)
}

// decoded is one record read back: its tracepoint and the event decoded
// from it as JSON, Microsoft's decoder's form.
type decoded struct {
	tracepoint string
	json       string
}

// readBack reads n records from ss and decodes them with eventheader.Decode.
func readBack(t *testing.T, ss *subsys.Session, n int) []decoded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []decoded
	buf := make([]byte, 1<<16)
	for len(out) < n {
		recs, err := ss.Read(ctx, buf, nil)
		if err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		for _, r := range recs {
			if r.Event == nil {
				continue
			}
			name := r.Event.Name()
			ev, err := eventheader.Decode(name, r.Raw[8:])
			if err != nil {
				t.Fatalf("decode %s record % x: %v", name, r.Raw, err)
			}
			js, err := ev.AppendJSON(nil)
			if err != nil {
				t.Fatalf("decode %s fields: %v", name, err)
			}
			out = append(out, decoded{name, string(js)})
		}
	}
	return out
}

func TestWriteReadBack(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			f, err := userevents.Open(&b.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if want := b.opts.Transport; b.opts.Backend == userevents.Daemon && f.Transport() != want {
				t.Fatalf("transport %v, want %v: %v", f.Transport(), want, f.RingError())
			}
			prov := "TestProv_" + strings.ReplaceAll(b.name, "-", "_")
			p, err := ehprovider.New(f, prov, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()

			req := ehprovider.Define3[uint32, string, float64](p, "Request", eventheader.LevelInformation, 0x1, "status", "path", "dur")
			all := ehprovider.Define4[bool, int8, []byte, uint64](p, "Misc", eventheader.LevelVerbose, 0x2, "ok", "delta", "blob", "n")
			dyn := p.Tracepoint(eventheader.LevelError, 0x10)
			if err := p.Err(); err != nil {
				t.Fatal(err)
			}
			if req.Enabled() || all.Enabled() || dyn.Enabled() {
				t.Fatal("enabled before anything is attached")
			}
			// Disabled: nothing is written.
			if err := req.Write(1, "/none", 0); err != nil {
				t.Fatal(err)
			}

			ss := b.sys.NewSession(subsys.SessionOptions{})
			defer ss.Close()
			if _, err := ss.AttachMatching("user_events:"+prov+"_*", true); err != nil {
				t.Fatal(err)
			}
			waitEnabled(t, req.Enabled)
			waitEnabled(t, all.Enabled)
			waitEnabled(t, dyn.Enabled)

			if err := req.Write(200, "/index.html", 1.5); err != nil {
				t.Fatal(err)
			}
			if err := all.Write(true, -3, []byte{0xde, 0xad}, 1<<40); err != nil {
				t.Fatal(err)
			}
			var bld ehprovider.Builder
			bld.ResetHeader(dyn, "Failure", eventheader.Header{ID: 7, Version: 1, Opcode: eventheader.OpcodeActivityStop})
			bld.AddInt32("errno", -2, 0)
			bld.AddString("what", "open", eventheader.FormatDefault, 0x12)
			if err := dyn.Write(&bld); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			got := readBack(t, ss, 3)
			want := []decoded{
				{prov + "_L4K1", `{ "n": "` + prov + `:Request", "status": 200, "path": "/index.html", "dur": 1.5, "meta": { "level": 4, "keyword": "0x1" } }`},
				{prov + "_L5K2", `{ "n": "` + prov + `:Misc", "ok": true, "delta": -3, "blob": "de ad", "n": 1099511627776, "meta": { "level": 5, "keyword": "0x2" } }`},
				{prov + "_L2K10", `{ "n": "` + prov + `:Failure", "errno": -2, "what;tag=0x12": "open", "meta": { "id": 7, "version": 1, "level": 2, "keyword": "0x10", "opcode": 2 } }`},
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// waitEnabled waits for the enable bit, which the daemon sets in the
// client's memory after the attach returns.
func waitEnabled(t *testing.T, enabled func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !enabled() {
		if time.Now().After(deadline) {
			t.Fatal("tracepoint not enabled 30 s after the session attached")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLazyRegistration(t *testing.T) {
	sys := subsys.New(subsys.Options{})
	k := inproc.New(sys)
	f, err := userevents.Open(k.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs := k.Tracefs()
	status := func() string {
		b, err := fs.ReadFile("user_events_status")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	p, err := ehprovider.New(f, "LazyProv", &ehprovider.Options{Group: "grp1"})
	if err != nil {
		t.Fatal(err)
	}
	if s := status(); strings.Contains(s, "LazyProv") {
		t.Fatalf("New registered tracepoints:\n%s", s)
	}
	a := p.Tracepoint(eventheader.LevelWarning, 0xf00)
	if a.Name() != "LazyProv_L3Kf00Ggrp1" {
		t.Errorf("name %q", a.Name())
	}
	if p.Tracepoint(eventheader.LevelWarning, 0xf00) != a {
		t.Error("the same level and keyword gave another tracepoint")
	}
	ev := ehprovider.Define1[string](p, "E", eventheader.LevelWarning, 0xf00, "s")
	if ev.Tracepoint() != a {
		t.Error("a typed event of the same level and keyword is not on the same tracepoint")
	}
	if p.Enabled(eventheader.LevelWarning, 0xf00) || p.Enabled(eventheader.LevelWarning, 1) {
		t.Error("Provider.Enabled before anything is attached")
	}
	if err := sys.SetFtrace(sys.Lookup("user_events", a.Name()), true); err != nil {
		t.Fatal(err)
	}
	if !p.Enabled(eventheader.LevelWarning, 0xf00) || !a.Enabled() || p.Enabled(eventheader.LevelWarning, 1) {
		t.Error("Provider.Enabled after the ftrace enable")
	}
	if s := status(); !strings.Contains(s, "LazyProv_L3Kf00Ggrp1") || strings.Count(s, "LazyProv") != 1 {
		t.Errorf("status after one tracepoint:\n%s", s)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if a.Enabled() {
		t.Error("enabled after Close")
	}
	late := p.Tracepoint(eventheader.LevelWarning, 1)
	if late.Enabled() || late.Err() == nil {
		t.Errorf("a tracepoint asked for after Close: err %v", late.Err())
	}
}

func TestInvalid(t *testing.T) {
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(subsys.New(subsys.Options{})).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"", "a b", "a:b"} {
		if _, err := ehprovider.New(f, name, nil); !errors.Is(err, eventheader.ErrName) {
			t.Errorf("New(%q): %v, want ErrName", name, err)
		}
	}
	if _, err := ehprovider.New(f, "P", &ehprovider.Options{Group: "Bad"}); !errors.Is(err, eventheader.ErrName) {
		t.Errorf("group Bad: %v, want ErrName", err)
	}
	p, err := ehprovider.New(f, "P", nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := p.Tracepoint(0, 1) // level 0 is invalid
	if tp.Err() == nil || p.Err() == nil || tp.Enabled() {
		t.Errorf("level 0: tracepoint err %v, provider err %v", tp.Err(), p.Err())
	}
	ev := ehprovider.Define1[int](p, "bad\x00name", eventheader.LevelInformation, 1, "x")
	if !errors.Is(ev.Err(), eventheader.ErrBuild) {
		t.Errorf("event name with a NUL: %v", ev.Err())
	}
	if err := ev.Write(1); err != nil {
		t.Errorf("disabled write: %v", err)
	}
}

func TestWriteOtherTracepoint(t *testing.T) {
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "Other", nil)
	a := p.Tracepoint(eventheader.LevelInformation, 1)
	c := p.Tracepoint(eventheader.LevelInformation, 2)
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	ss.AttachMatching("user_events:Other_*", true)
	var b ehprovider.Builder
	b.Reset(a, "x")
	if err := c.Write(&b); err == nil {
		t.Error("a Builder Reset for one tracepoint was written to another")
	}
}

// TestConcurrent writes from several goroutines, which ask for the same
// tracepoints and events at once, and counts what arrives.
func TestConcurrent(t *testing.T) {
	sys := subsys.New(subsys.Options{NumCPU: 2})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "Conc", nil)
	defer p.Close()
	ss := sys.NewSession(subsys.SessionOptions{BufferBytes: 16 << 20})
	defer ss.Close()
	if _, err := ss.AttachMatching("user_events:Conc_*", true); err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 4, 200
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			ev := ehprovider.Define2[int, string](p, "W", eventheader.LevelInformation, 1, "g", "s")
			tp := p.Tracepoint(eventheader.LevelWarning, 1)
			var b ehprovider.Builder
			for i := range each {
				if err := ev.Write(g, "x"); err != nil {
					errs <- err
					return
				}
				b.Reset(tp, "B")
				b.AddInt64("i", int64(i), 0)
				if err := tp.Write(&b); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := readBack(t, ss, 2*goroutines*each)
	if len(got) != 2*goroutines*each {
		t.Errorf("%d records, want %d", len(got), 2*goroutines*each)
	}
}

// TestManyTracepoints asks for tracepoints of several keywords per level
// and checks each is found again, and only for its level and keyword.
func TestManyTracepoints(t *testing.T) {
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(subsys.New(subsys.Options{})).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "Many", nil)
	defer p.Close()
	got := map[string]*ehprovider.Tracepoint{}
	for _, lv := range []eventheader.Level{1, 4, 5, 255} {
		for _, kw := range []uint64{0, 1, 2, 0x8000000000000000, ^uint64(0)} {
			tp := p.Tracepoint(lv, kw)
			if err := tp.Err(); err != nil {
				t.Fatal(err)
			}
			if got[tp.Name()] != nil {
				t.Fatalf("%s twice", tp.Name())
			}
			got[tp.Name()] = tp
		}
	}
	for name, tp := range got {
		if again := p.Tracepoint(tp.Level(), tp.Keyword()); again != tp {
			t.Errorf("%s: another tracepoint the second time (%s)", name, again.Name())
		}
	}
	if tp := p.Tracepoint(255, ^uint64(0)); tp.Name() != "Many_LffKffffffffffffffff" {
		t.Errorf("name %s", tp.Name())
	}
}
