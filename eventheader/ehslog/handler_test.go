package ehslog_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/eventheader/ehslog"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// rig is a provider on the in-process backend with a session attached to
// all its tracepoints, so that what a Handler writes can be read back.
type rig struct {
	sys     *subsys.Subsystem
	p       *ehprovider.Provider
	ss      *subsys.Session
	buf     []byte
	pending []event // read beyond what was asked for
}

func newRig(t testing.TB, provider string) *rig {
	t.Helper()
	sys := subsys.New(subsys.Options{NumCPU: 1})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	p, err := ehprovider.New(f, provider, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &rig{sys: sys, p: p, buf: make([]byte, 1<<20)}
}

// handler makes a Handler and attaches a session to every tracepoint of
// the provider (after New registered them).
func (r *rig) handler(t testing.TB, opts *ehslog.Options) *ehslog.Handler {
	t.Helper()
	h, err := ehslog.New(r.p, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.ss == nil {
		r.ss = r.sys.NewSession(subsys.SessionOptions{})
		t.Cleanup(func() { r.ss.Close() })
	}
	if _, err := r.ss.AttachMatching("user_events:"+r.p.Name()+"_*", true); err != nil {
		t.Fatal(err)
	}
	return h
}

// checked fails the test on a Handle error, which slog.Logger drops.
type checked struct {
	slog.Handler
	t testing.TB
}

func (c checked) Handle(ctx context.Context, r slog.Record) error {
	err := c.Handler.Handle(ctx, r)
	if err != nil {
		c.t.Errorf("Handle %q: %v", r.Message, err)
	}
	return err
}
func (c checked) WithAttrs(as []slog.Attr) slog.Handler { return checked{c.Handler.WithAttrs(as), c.t} }
func (c checked) WithGroup(name string) slog.Handler    { return checked{c.Handler.WithGroup(name), c.t} }

// event is one record read back.
type event struct {
	tracepoint string
	ev         eventheader.Event
	json       string
	fields     map[string]any
}

// read reads n events, decoding each with eventheader.Decode.
func (r *rig) read(t testing.TB, n int) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := r.pending
	for len(out) < n {
		recs, err := r.ss.Read(ctx, r.buf, nil)
		if err != nil {
			for _, e := range out {
				t.Logf("read: %.200s", e.json)
			}
			t.Fatalf("read %d of %d events: %v", len(out), n, err)
		}
		for _, rec := range recs {
			if rec.Event == nil {
				continue
			}
			name := rec.Event.Name()
			raw := append([]byte(nil), rec.Raw[8:]...)
			ev, err := eventheader.Decode(name, raw)
			if err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			js, err := ev.AppendJSON(nil)
			if err != nil {
				t.Fatalf("decode %s fields: %v", name, err)
			}
			m, err := toMap(&ev)
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			out = append(out, event{name, ev, string(js), m})
		}
	}
	r.pending = out[n:]
	return out[:n:n]
}

// toMap turns an event's fields into what slogtest wants: a map of field
// names to values, a nested map for each struct.
func toMap(ev *eventheader.Event) (map[string]any, error) {
	top := map[string]any{}
	stack := []map[string]any{top}
	it := ev.Fields()
	for it.Next() {
		item := it.Item()
		cur := stack[len(stack)-1]
		name := string(item.FieldName())
		switch item.Kind {
		case eventheader.ItemStructBegin:
			m := map[string]any{}
			cur[name] = m
			stack = append(stack, m)
		case eventheader.ItemStructEnd:
			stack = stack[:len(stack)-1]
		case eventheader.ItemValue:
			v, err := value(item)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", name, err)
			}
			if _, dup := cur[name]; dup {
				return nil, fmt.Errorf("field %s twice", name)
			}
			cur[name] = v
		default:
			return nil, fmt.Errorf("field %s: unexpected %v", name, item.Kind)
		}
	}
	return top, it.Err()
}

func value(it *eventheader.Item) (any, error) {
	switch it.Encoding {
	case eventheader.EncodingStringLength16Char8:
		return string(it.Value), nil
	case eventheader.EncodingBinaryLength16Char8:
		return append([]byte(nil), it.Value...), nil
	case eventheader.EncodingValue8:
		if it.Format == eventheader.FormatBoolean {
			return it.Value[0] != 0, nil
		}
		return uint64(it.Value[0]), nil
	case eventheader.EncodingValue64:
		u := binary.LittleEndian.Uint64(it.Value)
		switch it.Format {
		case eventheader.FormatSignedInt:
			return int64(u), nil
		case eventheader.FormatFloat:
			return math.Float64frombits(u), nil
		case eventheader.FormatDefault:
			return u, nil
		}
	}
	return nil, fmt.Errorf("encoding %v format %v not written by ehslog", it.Encoding, it.Format)
}

// TestSlogtest runs testing/slogtest's cases, each record read back from
// the in-process subsystem and decoded with eventheader.Decode; again with
// an identity ReplaceAttr, which takes the built-ins the other way.
func TestSlogtest(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *ehslog.Options
	}{
		{"plain", nil},
		{"ReplaceAttr", &ehslog.Options{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return a }}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r *rig
			slogtest.Run(t, func(t *testing.T) slog.Handler {
				r = newRig(t, "SlogTest")
				return r.handler(t, c.opts)
			}, func(t *testing.T) map[string]any {
				evs := r.read(t, 1)
				t.Log(evs[0].json)
				return evs[0].fields
			})
		})
	}
}

// TestHandlerAll is slogtest.TestHandler, all cases on one handler.
func TestHandlerAll(t *testing.T) {
	r := newRig(t, "SlogAll")
	h := r.handler(t, nil)
	var got []map[string]any
	err := slogtest.TestHandler(h, func() []map[string]any {
		evs := r.read(t, 17)
		for _, e := range evs {
			got = append(got, e.fields)
		}
		return got
	})
	if err != nil {
		t.Fatal(err)
	}
	// The tracepoints slogtest's Info records went to.
	if got := h.Tracepoint(slog.LevelInfo).Name(); got != "SlogAll_L4K1" {
		t.Errorf("Info tracepoint %s", got)
	}
}

func TestLevels(t *testing.T) {
	for _, c := range []struct {
		l    slog.Level
		want eventheader.Level
		text string
	}{
		{slog.LevelDebug - 8, eventheader.LevelVerbose, "DEBUG-8"},
		{slog.LevelDebug, eventheader.LevelVerbose, "DEBUG"},
		{slog.LevelDebug + 3, eventheader.LevelVerbose, "DEBUG+3"},
		{slog.LevelInfo, eventheader.LevelInformation, "INFO"},
		{slog.LevelInfo + 2, eventheader.LevelInformation, "INFO+2"},
		{slog.LevelWarn - 1, eventheader.LevelInformation, "INFO+3"},
		{slog.LevelWarn, eventheader.LevelWarning, "WARN"},
		{slog.LevelError - 1, eventheader.LevelWarning, "WARN+3"},
		{slog.LevelError, eventheader.LevelError, "ERROR"},
		{slog.LevelError + 3, eventheader.LevelError, "ERROR+3"},
		{slog.LevelError + 4, eventheader.LevelCriticalError, "ERROR+4"},
		{slog.Level(math.MaxInt32), eventheader.LevelCriticalError, slog.Level(math.MaxInt32).String()},
		{slog.Level(math.MinInt32), eventheader.LevelVerbose, slog.Level(math.MinInt32).String()},
	} {
		if got := ehslog.Level(c.l); got != c.want {
			t.Errorf("Level(%v) = %v, want %v", c.l, got, c.want)
		}
		if c.l.String() != c.text {
			t.Fatalf("test table: %d is %s", c.l, c.l.String())
		}
	}

	r := newRig(t, "SlogLevels")
	h := r.handler(t, nil)
	l := slog.New(h)
	ctx := context.Background()
	for _, lv := range []slog.Level{slog.LevelDebug - 1, slog.LevelInfo + 1, slog.LevelWarn, slog.LevelError + 2, slog.LevelError + 4} {
		l.Log(ctx, lv, "m")
	}
	evs := r.read(t, 5)
	for i, want := range []struct{ tp, level string }{
		{"SlogLevels_L5K1", "DEBUG-1"}, {"SlogLevels_L4K1", "INFO+1"}, {"SlogLevels_L3K1", "WARN"},
		{"SlogLevels_L2K1", "ERROR+2"}, {"SlogLevels_L1K1", "ERROR+4"},
	} {
		if evs[i].tracepoint != want.tp || evs[i].fields["level"] != want.level {
			t.Errorf("event %d on %s level %v, want %s %s", i, evs[i].tracepoint, evs[i].fields["level"], want.tp, want.level)
		}
		if int(evs[i].ev.Header.Level) != 5-i {
			t.Errorf("event %d header level %d", i, evs[i].ev.Header.Level)
		}
	}
}

// TestEnabled: the enable bits decide, per level, and Options.Level
// before them.
func TestEnabled(t *testing.T) {
	r := newRig(t, "SlogEnabled")
	h, err := ehslog.New(r.p, &ehslog.Options{Keyword: 0x20, Level: slog.LevelInfo})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelError} {
		if h.Enabled(ctx, l) {
			t.Errorf("%v enabled with nothing attached", l)
		}
	}
	ss := r.sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if _, err := ss.AttachMatching("user_events:SlogEnabled_L4K20", true); err != nil {
		t.Fatal(err)
	}
	for l, want := range map[slog.Level]bool{slog.LevelDebug: false, slog.LevelInfo: true, slog.LevelInfo + 3: true, slog.LevelWarn: false, slog.LevelError: false} {
		if got := h.Enabled(ctx, l); got != want {
			t.Errorf("Enabled(%v) = %v with L4K20 attached, want %v", l, got, want)
		}
	}
	// Below Options.Level: not enabled even if its tracepoint is.
	if _, err := ss.AttachMatching("user_events:SlogEnabled_L5K20", true); err != nil {
		t.Fatal(err)
	}
	if !h.Tracepoint(slog.LevelDebug).Enabled() || h.Enabled(ctx, slog.LevelDebug) {
		t.Errorf("Debug: tracepoint enabled %v, Enabled %v; want true, false", h.Tracepoint(slog.LevelDebug).Enabled(), h.Enabled(ctx, slog.LevelDebug))
	}
	// Handle of a disabled level writes nothing and says nothing.
	rec := slog.NewRecord(time.Now(), slog.LevelError, "lost", 0)
	if err := h.Handle(ctx, rec); err != nil {
		t.Fatal(err)
	}
}

// TestValues: each kind's encoding, shown as Microsoft's decoder shows it.
func TestValues(t *testing.T) {
	r := newRig(t, "SlogValues")
	h := r.handler(t, &ehslog.Options{EventName: "App"})
	tm := time.Date(2026, 11, 25, 19, 0, 0, 123456789, time.UTC)
	rec := slog.NewRecord(tm, slog.LevelWarn, "hello", 0)
	rec.AddAttrs(
		slog.String("s", "x\"y"),
		slog.Int("i", -3),
		slog.Uint64("u", math.MaxUint64),
		slog.Float64("f", 2.5),
		slog.Bool("b", true),
		slog.Duration("d", 1500*time.Millisecond),
		slog.Time("t", tm.Add(time.Second)),
		slog.Any("bytes", []byte{1, 0xab}),
		slog.Any("err", errors.New("boom")),
		slog.Any("stringer", slog.LevelWarn),
		slog.Any("struct", struct{ A int }{7}),
		slog.Any("nil", nil),
		slog.Any("k\x00ey", 1),
	)
	if err := h.Handle(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	ev := r.read(t, 1)[0]
	want := `{ "n": "SlogValues:App", "time": "2026-11-25T19:00:00.123456789Z", "level": "WARN", "msg": "hello", ` +
		`"s": "x\"y", "i": -3, "u": 18446744073709551615, "f": 2.5, "b": true, "d": 1500000000, ` +
		`"t": "2026-11-25T19:00:01.123456789Z", "bytes": "01 ab", "err": "boom", "stringer": "WARN", ` +
		`"struct": "{A:7}", "nil": "<nil>", "k_ey": 1, "meta": { "level": 3, "keyword": "0x1" } }`
	if ev.json != want {
		t.Errorf("got  %s\nwant %s", ev.json, want)
	}
}

// TestSource: AddSource's struct, as slog's JSON handler nests it.
func TestSource(t *testing.T) {
	r := newRig(t, "SlogSource")
	l := slog.New(r.handler(t, &ehslog.Options{AddSource: true}))
	l.Info("here")
	src, _ := r.read(t, 1)[0].fields["source"].(map[string]any)
	if fn, _ := src["function"].(string); !strings.HasSuffix(fn, ".TestSource") {
		t.Errorf("source %v: function is not TestSource", src)
	}
	if f, _ := src["file"].(string); !strings.HasSuffix(f, "handler_test.go") {
		t.Errorf("source %v: file is not this one", src)
	}
	if line, _ := src["line"].(int64); line <= 0 {
		t.Errorf("source %v: no line", src)
	}
}

// TestGroups: WithGroup and WithAttrs prepared, record attributes in the
// innermost group, empty groups omitted at every depth, values in order.
func TestGroups(t *testing.T) {
	r := newRig(t, "SlogGroups")
	h := r.handler(t, nil)
	l := slog.New(h).With("a", 1).WithGroup("G").With("b", 2).WithGroup("H").WithGroup("I")
	l.Info("m1", "c", 3)
	l.Info("m2")
	l.Info("m3", slog.Group("J", slog.Group("K")), slog.Group("", slog.Int("x", 4)))
	slog.New(h).WithGroup("E").With(slog.Group("F")).Info("m4")
	evs := r.read(t, 4)
	for i, want := range []string{
		`"a": 1, "G": { "b": 2, "H": { "I": { "c": 3 } } }`,
		`"a": 1, "G": { "b": 2 }`,
		`"a": 1, "G": { "b": 2, "H": { "I": { "x": 4 } } }`,
		``,
	} {
		js := evs[i].json
		js = js[strings.Index(js, `"msg"`):]
		js = js[strings.Index(js, ", ")+2 : strings.Index(js, `"meta"`)]
		js = strings.TrimSuffix(js, ", ")
		if js != want {
			t.Errorf("event %d: %s\nwant fields %s", i, evs[i].json, want)
		}
	}
}

// TestLimits: a struct's 127 fields and 8 nested structs; what is
// dropped is counted in "!DROPPED".
func TestLimits(t *testing.T) {
	r := newRig(t, "SlogLimits")
	h := r.handler(t, nil)
	l := slog.New(checked{h, t})

	many := func(n int) []any {
		var as []any
		for i := range n {
			as = append(as, slog.Int(fmt.Sprint("f", i), i))
		}
		return as
	}
	// 130 attributes in a group: 127 kept.
	l.Info("wide", slog.Group("G", many(130)...))
	// 200 at the top level: all kept.
	l.Info("top", many(200)...)
	// WithAttrs in a group: 126 kept, one field left for a nested group
	// or the record's attributes.
	lg := l.WithGroup("W").With(many(130)...)
	lg.Info("withattrs", "r1", 1, "r2", 2)
	// 10 nested groups: 8 structs, the rest dropped.
	var deep slog.Attr = slog.Int("leaf", 1)
	for i := 9; i >= 0; i-- {
		deep = slog.Group(fmt.Sprint("g", i), deep, slog.Int("x", i))
	}
	l.Info("deep", deep)
	ld := l
	for i := range 10 {
		ld = ld.WithGroup(fmt.Sprint("w", i))
	}
	ld.Info("deepwith", "y", 1)
	evs := r.read(t, 5)
	count := func(m map[string]any) int {
		n := 0
		for k := range m {
			if strings.HasPrefix(k, "f") {
				n++
			}
		}
		return n
	}
	if g, _ := evs[0].fields["G"].(map[string]any); count(g) != 127 || evs[0].fields["!DROPPED"] != uint64(3) {
		t.Errorf("wide: %d fields in G, dropped %v; want 127, 3", count(g), evs[0].fields["!DROPPED"])
	}
	if count(evs[1].fields) != 200 || evs[1].fields["!DROPPED"] != nil {
		t.Errorf("top: %d fields, dropped %v; want 200, none", count(evs[1].fields), evs[1].fields["!DROPPED"])
	}
	if g, _ := evs[2].fields["W"].(map[string]any); count(g) != 126 || g["r1"] != int64(1) || g["r2"] != nil || evs[2].fields["!DROPPED"] != uint64(5) {
		t.Errorf("withattrs: %d fields in W, r1 %v r2 %v, dropped %v; want 126, 1, none, 5", count(g), g["r1"], g["r2"], evs[2].fields["!DROPPED"])
	}
	depth := 0
	for m := evs[3].fields; ; depth++ {
		next, ok := m[fmt.Sprint("g", depth)].(map[string]any)
		if !ok {
			break
		}
		m = next
	}
	// g0..g7 kept; g8 (x=8, and g9's leaf and x) dropped.
	if depth != 8 || evs[3].fields["!DROPPED"] != uint64(3) {
		t.Errorf("deep: %d nested structs, dropped %v; want 8, 3: %s", depth, evs[3].fields["!DROPPED"], evs[3].json)
	}
	if evs[4].fields["!DROPPED"] != uint64(1) || evs[4].fields["w0"] != nil {
		t.Errorf("deepwith: %s; want y dropped and no groups", evs[4].json)
	}
}

// TestConcurrent: records from many goroutines and derived handlers, each
// read back whole (run with -race).
func TestConcurrent(t *testing.T) {
	r := newRig(t, "SlogConc")
	h := r.handler(t, nil)
	base := slog.New(h).With("svc", "x")
	const g, n = 4, 50
	done := make(chan struct{})
	for i := range g {
		go func() {
			defer func() { done <- struct{}{} }()
			l := base.WithGroup(fmt.Sprint("g", i))
			for j := range n {
				l.Info("m", "j", j)
			}
		}()
	}
	for range g {
		<-done
	}
	evs := r.read(t, g*n)
	seen := map[string]int{}
	for _, e := range evs {
		for k, v := range e.fields {
			if m, ok := v.(map[string]any); ok {
				if _, ok := m["j"].(int64); ok {
					seen[k]++
				}
			}
		}
	}
	for i := range g {
		if seen[fmt.Sprint("g", i)] != n {
			t.Errorf("group g%d: %d events, want %d", i, seen[fmt.Sprint("g", i)], n)
		}
	}
}

// TestAllocs: an enabled record of the common kinds allocates nothing,
// through a Handler with prepared attributes and groups. (Five attributes:
// slog.Record holds five in itself and allocates for more.)
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := newRig(t, "SlogAllocs")
	h := r.handler(t, nil)
	l := slog.New(h).With("svc", "api").WithGroup("req")
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		l.LogAttrs(ctx, slog.LevelInfo, "request", slog.Int("status", 200), slog.String("path", "/index.html"), slog.Float64("dur", 1.5),
			slog.Bool("ok", true), slog.Duration("d", time.Second))
	})
	if n != 0 {
		t.Errorf("%v allocations per enabled record, want 0", n)
	}
	// A group of a time, an unsigned and a []byte, and a LogValuer.
	g := slog.Attr{Key: "g", Value: slog.GroupValue(slog.Time("t", time.Now()), slog.Uint64("u", 7), slog.Any("b", []byte{1, 2}))}
	lv := slog.Any("lazy", &lazy{"x"})
	n = testing.AllocsPerRun(100, func() {
		l.LogAttrs(ctx, slog.LevelWarn+1, "grouped", g, lv)
	})
	if n != 0 {
		t.Errorf("%v allocations per enabled record with a group, want 0", n)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := ehslog.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	r := newRig(t, "SlogErr")
	if _, err := ehslog.New(r.p, &ehslog.Options{EventName: "a\x00b"}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("event name with a NUL: %v", err)
	}
	r.p.Close()
	h, err := ehslog.New(r.p, nil)
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("closed provider: %v", err)
	}
	if h == nil || h.Enabled(context.Background(), slog.LevelError) {
		t.Error("the Handler of a closed provider is not a disabled one")
	}
}

// TestReplaceAttr: slog.HandlerOptions.ReplaceAttr's contract — the
// built-ins with nil groups (time dropped here, level renamed, source a
// *slog.Source), other attributes resolved with their groups, of With
// too, a zero Attr dropping the attribute, a group returned written as a
// struct.
func TestReplaceAttr(t *testing.T) {
	r := newRig(t, "SlogReplace")
	var calls []string
	h := r.handler(t, &ehslog.Options{AddSource: true, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		calls = append(calls, strings.Join(append(groups, a.Key), "."))
		switch {
		case len(groups) == 0 && a.Key == slog.TimeKey:
			return slog.Attr{}
		case len(groups) == 0 && a.Key == slog.LevelKey:
			return slog.String("severity", a.Value.Any().(slog.Level).String())
		case len(groups) == 0 && a.Key == slog.SourceKey:
			src := a.Value.Any().(*slog.Source)
			src.File = "f.go"
			return a
		case a.Key == "password":
			return slog.String(a.Key, "***")
		case a.Key == "drop":
			return slog.Attr{}
		case a.Key == "expand":
			return slog.Group("expanded", slog.Int("x", 1))
		case a.Value.Kind() == slog.KindGroup:
			t.Errorf("ReplaceAttr called with group %s", a.Key)
		}
		return a
	}})
	l := slog.New(checked{h, t}).With("svc", "api").WithGroup("req").With("password", "hunter2")
	l.Info("login", slog.Group("user", "password", "x", "drop", 1, "name", &lazy{"bob"}), "expand", true)
	ev := r.read(t, 1)[0]
	want := `{ "n": "SlogReplace:Log", "severity": "INFO", "source": { "function": "github.com/uetrace/uetrace/eventheader/ehslog_test.TestReplaceAttr", ` +
		`"file": "f.go", "line": LINE }, "msg": "login", "svc": "api", "req": { "password": "***", "user": { "password": "***", "name": "bob" }, ` +
		`"expanded": { "x": 1 } }, "meta": { "level": 4, "keyword": "0x1" } }`
	line, _ := ev.fields["source"].(map[string]any)["line"].(int64)
	want = strings.Replace(want, "LINE", fmt.Sprint(line), 1)
	if ev.json != want {
		t.Errorf("got  %s\nwant %s", ev.json, want)
	}
	wantCalls := "svc req.password time level source msg req.user.password req.user.drop req.user.name req.expand req.expanded.x"
	if got := strings.Join(calls, " "); got != wantCalls {
		t.Errorf("ReplaceAttr calls %s\nwant %s", got, wantCalls)
	}
}

// lazy is a LogValuer.
type lazy struct{ s string }

func (l *lazy) LogValue() slog.Value { return slog.StringValue(l.s) }

// leveler is a Leveler that is neither a Level nor a *LevelVar.
type leveler struct{ l slog.Level }

func (l leveler) Level() slog.Level { return l.l }

// TestMinLevel: Options.Level as a slog.Level, a *slog.LevelVar (changed
// while in use) and another Leveler, which Handle checks.
func TestMinLevel(t *testing.T) {
	r := newRig(t, "SlogMin")
	var lv slog.LevelVar
	lv.Set(slog.LevelWarn)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		min      slog.Leveler
		enabled  bool // Enabled(Info)
		infoSeen bool
	}{
		{"Level", slog.LevelWarn, false, false},
		{"LevelVar", &lv, false, false},
		{"other", leveler{slog.LevelWarn}, true, false},
		{"none", nil, true, true},
	} {
		h := r.handler(t, &ehslog.Options{Level: c.min})
		if got := h.Enabled(ctx, slog.LevelInfo); got != c.enabled {
			t.Errorf("%s: Enabled(Info) = %v, want %v", c.name, got, c.enabled)
		}
		if !h.Enabled(ctx, slog.LevelWarn) {
			t.Errorf("%s: Warn not enabled", c.name)
		}
		l := slog.New(checked{h, t})
		l.Info("info")
		l.Warn("warn")
		evs := r.read(t, 1)
		if c.infoSeen {
			evs = append(evs, r.read(t, 1)...)
		}
		if msg := evs[0].fields["msg"]; msg != map[bool]string{true: "info", false: "warn"}[c.infoSeen] {
			t.Errorf("%s: first record %v", c.name, msg)
		}
	}
	lv.Set(slog.LevelInfo)
	h := r.handler(t, &ehslog.Options{Level: &lv})
	if !h.Enabled(ctx, slog.LevelInfo) {
		t.Error("LevelVar lowered to Info: Info not enabled")
	}
	if len(r.pending) > 0 {
		t.Errorf("records below the minimum written: %s", r.pending[0].json)
	}
}
