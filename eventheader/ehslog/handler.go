package ehslog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/userevents"
)

// Options configure a Handler. The zero value — and a nil *Options — is
// keyword 1, event name "Log", no minimum level, no source.
type Options struct {
	// Keyword is the keyword of the Handler's tracepoints (0: 1, as
	// OpenTelemetry's exporter uses).
	Keyword uint64
	// EventName names every event ("": "Log"); "name;attr=value"
	// attributes allowed, no NUL.
	EventName string
	// Level, if set, is the minimum level written, checked after the
	// tracepoint's enable bit. Without it the listeners decide, by the
	// tracepoints they attach to. A slog.Level or a *slog.LevelVar is
	// checked in Enabled; another Leveler in Handle (Enabled does not call
	// it: a call would double Enabled's cost for every Handler), so slog
	// still makes the records below it, which are then dropped.
	Level slog.Leveler
	// AddSource adds the "source" struct: function, file and line of the
	// record's PC.
	AddSource bool
	// ReplaceAttr rewrites or drops (by returning the zero Attr) each
	// attribute before it is written, as slog.HandlerOptions.ReplaceAttr
	// does: the built-ins too — time (a time.Time, when not zero), level
	// (a slog.Level), source (a *slog.Source, with AddSource) and msg —
	// with groups nil; other attributes with the names of the groups
	// holding them, resolved, never groups themselves. WithAttrs calls it
	// once for its attributes. The built-ins then take the slower way:
	// their values are made and encoded like any attribute's.
	ReplaceAttr func(groups []string, a slog.Attr) slog.Attr
}

// DefaultEventName is the event name when Options.EventName is empty.
const DefaultEventName = "Log"

// Handler writes slog records as EventHeader events. It is safe for
// concurrent use; the Handlers WithAttrs and WithGroup return share its
// tracepoints.
type Handler struct {
	// evs are the tracepoints' userevents events by EventHeader level
	// (nil where registration failed), held here for Enabled: one load
	// fewer than through c and the Tracepoint.
	evs      [8]*userevents.Event // 8: an index &7 needs no bounds check
	minKind  uint8
	minConst slog.Level
	minVar   *slog.LevelVar
	c        *common
	// meta and data are the prepared fields of WithAttrs and the structs
	// of WithGroup: definitions and values, as every record copies them.
	meta, data []byte
	// groups are the open groups, outermost first.
	groups []group
	// dropped counts the attributes of WithAttrs that did not fit.
	dropped int
	// deep counts the groups opened beyond maxNesting: their attributes
	// are dropped.
	deep int
	// names are the names of the open groups, deep ones too, for
	// ReplaceAttr.
	names []string
}

// group is an open group: its struct definition at meta[at:], its field
// count at meta[countAt], patched per record, and its prepared fields.
type group struct {
	at, countAt int
	n           int
}

// common is what a Handler and those derived from it share.
type common struct {
	tps       [6]*ehprovider.Tracepoint // by EventHeader level, 1..5
	name      string
	addSource bool
	replace   func(groups []string, a slog.Attr) slog.Attr
	min       slog.Leveler // Options.Level when neither a Level nor a *LevelVar
}

// New returns a Handler writing to p's tracepoints for Options.Keyword,
// which it registers now — all five levels — so that listeners can attach
// to them before the first record. An error says the options are wrong or
// a tracepoint could not be registered; the Handler it returns with the
// latter is usable, its unregistered levels never enabled.
func New(p *ehprovider.Provider, opts *Options) (*Handler, error) {
	if p == nil {
		return nil, errors.New("ehslog: New needs a provider (ehprovider.New)")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Keyword == 0 {
		o.Keyword = 1
	}
	if o.EventName == "" {
		o.EventName = DefaultEventName
	}
	if strings.IndexByte(o.EventName, 0) >= 0 {
		return nil, fmt.Errorf("ehslog: event name %q holds a NUL, which ends a name in the metadata: remove it", o.EventName)
	}
	c := &common{name: o.EventName, addSource: o.AddSource, replace: o.ReplaceAttr}
	var errs []error
	for l := eventheader.LevelCriticalError; l <= eventheader.LevelVerbose; l++ {
		c.tps[l] = p.Tracepoint(l, o.Keyword)
		errs = append(errs, c.tps[l].Err())
	}
	c.tps[0] = c.tps[eventheader.LevelVerbose] // never used: level() is 1..5
	h := &Handler{c: c}
	switch lv := o.Level.(type) {
	case nil:
	case slog.Level:
		h.minKind, h.minConst = minConst, lv
	case *slog.LevelVar:
		h.minKind, h.minVar = minVar, lv
	default:
		h.minKind, c.min = minOther, lv
	}
	for l, tp := range c.tps {
		h.evs[l] = tp.Event()
	}
	return h, errors.Join(errs...)
}

// Level returns the EventHeader level a slog level is written at: the
// band of four slog levels from a named one up (see the package doc).
func Level(l slog.Level) eventheader.Level {
	return eventheader.Level(level(l))
}

// level is 4 - floor(l/4), clamped to 1..5: Debug (-4) 5, Info (0) 4,
// Warn (4) 3, Error (8) 2, Error+4 and above 1, below Debug 5.
func level(l slog.Level) int {
	return min(max(4-int(l>>2), 1), 5)
}

// Enabled reports whether a record of level l would be written: its
// tracepoint's enable bit is set and l is not below Options.Level (when
// that is a slog.Level or a *slog.LevelVar).
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	// The enable bit first: while nobody listens that is all there is.
	ev := h.evs[level(l)&7]
	if ev == nil || !ev.Enabled() {
		return false
	}
	// No calls: one would give Enabled a frame and double its cost.
	switch h.minKind {
	case minConst:
		return l >= h.minConst
	case minVar:
		return l >= h.minVar.Level() // inlined: an atomic load
	}
	return true // no minimum, or another Leveler's, which Handle checks
}

// How Options.Level is checked.
const (
	minNone  = iota
	minConst // a slog.Level
	minVar   // a *slog.LevelVar
	minOther // another Leveler: its Level is a call, made in Handle
)

// Tracepoint returns the tracepoint records of level l are written to.
func (h *Handler) Tracepoint(l slog.Level) *ehprovider.Tracepoint {
	return h.c.tps[level(l)]
}

// state is one Handle's scratch, pooled.
type state struct {
	b   ehprovider.Builder
	e   encoder
	be  encoder // the built-ins, with ReplaceAttr
	buf []byte
}

var statePool = sync.Pool{New: func() any { return new(state) }}

// Handle writes r if its tracepoint is enabled (and r is not below an
// Options.Level that Enabled does not check; slog.Logger asks Enabled
// first). It returns the error of building or writing the event; a
// listener detaching during the write may make it the backend's EBADF.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	tp := h.c.tps[level(r.Level)]
	if !tp.Enabled() || h.minKind == minOther && r.Level < h.c.min.Level() {
		return nil
	}
	s := statePool.Get().(*state)
	err := h.write(s, tp, &r)
	statePool.Put(s)
	return err
}

func (h *Handler) write(s *state, tp *ehprovider.Tracepoint, r *slog.Record) error {
	// The record's attributes first, into the encoder's own buffers: their
	// number decides the innermost group's count, and whether the open
	// groups are written at all.
	if h.c.replace != nil {
		h.builtins(s, r) // first, as slog's handlers call ReplaceAttr
	}
	e := &s.e
	e.reset()
	e.dropped = h.dropped
	if e.replace = h.c.replace; e.replace != nil {
		e.groups = append(e.groups, h.names...)
	}
	max, depth := maxTop, len(h.groups)+h.deep
	if len(h.groups) > 0 {
		max = maxFields - h.groups[len(h.groups)-1].n
	}
	n := 0
	if r.NumAttrs() > 0 {
		r.Attrs(func(a slog.Attr) bool {
			e.attr(a, &n, max, depth)
			return true
		})
	}
	keep := len(h.groups)
	if n == 0 {
		for keep > 0 && h.groups[keep-1].n == 0 {
			keep--
		}
	}

	b := &s.b
	b.Reset(tp, h.c.name)
	if h.c.replace != nil {
		b.AppendMetadata(s.be.meta)
		b.AppendRaw(s.be.data)
		e.dropped += s.be.dropped
	} else {
		h.builtinsFast(s, r)
	}

	// The prepared fields and structs, each kept group's count patched:
	// one more than its own fields for the group inside it, the record's
	// attributes for the innermost. Groups after keep hold nothing, so
	// their data is empty and their definitions are left out.
	end := len(h.meta)
	if keep < len(h.groups) {
		end = h.groups[keep].at
	}
	prev := 0
	for i, g := range h.groups[:keep] {
		b.AppendMetadata(h.meta[prev:g.countAt])
		c := g.n + 1
		if i == keep-1 {
			c = g.n
			if keep == len(h.groups) {
				c += n
			}
		}
		b.AppendMetadata([]byte{byte(c)})
		prev = g.countAt + 1
	}
	b.AppendMetadata(h.meta[prev:end])
	b.AppendRaw(h.data)
	b.AppendMetadata(e.meta)
	b.AppendRaw(e.data)
	if e.dropped > 0 {
		// After the structs' counted fields: at the top level.
		b.AddUint64(droppedKey, uint64(e.dropped), eventheader.FormatDefault, 0)
	}
	return tp.Write(b)
}

// builtinsFast writes the built-in fields, their definitions made once.
func (h *Handler) builtinsFast(s *state, r *slog.Record) {
	b := &s.b
	if !r.Time.IsZero() {
		s.buf = r.Time.AppendFormat(s.buf[:0], time.RFC3339Nano)
		b.AppendMetadata(metaTime)
		b.AppendCounted(eventheader.EncodingStringLength16Char8, s.buf)
	}
	s.buf = appendLevel(s.buf[:0], r.Level)
	b.AppendMetadata(metaLevel)
	b.AppendCounted(eventheader.EncodingStringLength16Char8, s.buf)
	if h.c.addSource && r.PC != 0 {
		fs := runtime.CallersFrames([]uintptr{r.PC})
		f, _ := fs.Next()
		b.AppendMetadata(metaSource)
		b.AppendString8(cut(f.Function))
		b.AppendString8(cut(f.File))
		b.AppendValue64(uint64(int64(f.Line)))
	}
	b.AppendMetadata(metaMsg)
	b.AppendString8(cut(r.Message))
}

// builtins encodes the built-in fields through ReplaceAttr, as attributes
// of the top level, into s.be.
func (h *Handler) builtins(s *state, r *slog.Record) {
	e := &s.be
	e.reset()
	e.replace = h.c.replace
	n := 0
	if !r.Time.IsZero() {
		e.attr(slog.Time(slog.TimeKey, r.Time), &n, maxTop, 0)
	}
	e.attr(slog.Any(slog.LevelKey, r.Level), &n, maxTop, 0)
	if h.c.addSource && r.PC != 0 {
		fs := runtime.CallersFrames([]uintptr{r.PC})
		f, _ := fs.Next()
		e.attr(slog.Any(slog.SourceKey, &slog.Source{Function: f.Function, File: f.File, Line: f.Line}), &n, maxTop, 0)
	}
	e.attr(slog.String(slog.MessageKey, r.Message), &n, maxTop, 0)
}

// The built-in fields' definitions, written once.
var (
	metaTime   = builtin(func(e *encoder) { e.def(slog.TimeKey, eventheader.EncodingStringLength16Char8, 0) })
	metaLevel  = builtin(func(e *encoder) { e.def(slog.LevelKey, eventheader.EncodingStringLength16Char8, 0) })
	metaMsg    = builtin(func(e *encoder) { e.def(slog.MessageKey, eventheader.EncodingStringLength16Char8, 0) })
	metaSource = builtin(func(e *encoder) {
		e.meta = appendName(e.meta, slog.SourceKey)
		e.meta = append(e.meta, byte(eventheader.EncodingStruct|eventheader.EncodingChain), 3)
		e.def("function", eventheader.EncodingStringLength16Char8, 0)
		e.def("file", eventheader.EncodingStringLength16Char8, 0)
		e.def("line", eventheader.EncodingValue64, eventheader.FormatSignedInt)
	})
)

func builtin(f func(*encoder)) []byte {
	var e encoder
	f(&e)
	return e.meta
}

// droppedKey names the field counting the attributes that did not fit.
const droppedKey = "!DROPPED"

// WithAttrs returns a Handler whose records hold attrs, in the current
// group, after those it holds already. The attributes are resolved and
// encoded now, once.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := h.clone()
	e := encoder{meta: h2.meta, data: h2.data, replace: h.c.replace, groups: slices.Clip(h.names)}
	depth := len(h2.groups) + h2.deep
	max, n := maxTop, 0
	np := &n
	if len(h2.groups) > 0 {
		// One field kept for a group opened inside this one.
		max, np = maxFields-1, &h2.groups[len(h2.groups)-1].n
	}
	for _, a := range attrs {
		e.attr(a, np, max, depth)
	}
	h2.meta, h2.data = e.meta, e.data
	h2.dropped += e.dropped
	return h2
}

// WithGroup returns a Handler whose attributes, its own and its records',
// are in a group (a struct) named name inside the current group. An empty
// name returns h, as slog asks.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := h.clone()
	h2.names = append(h2.names, name)
	if len(h2.groups) >= maxNesting {
		h2.deep++
		return h2
	}
	at := len(h2.meta)
	h2.meta = appendName(h2.meta, name)
	h2.meta = append(h2.meta, byte(eventheader.EncodingStruct|eventheader.EncodingChain), 0)
	h2.groups = append(h2.groups, group{at: at, countAt: len(h2.meta) - 1})
	return h2
}

// clone copies h with its own prepared bytes and groups, so that appending
// to them does not write into h's.
func (h *Handler) clone() *Handler {
	h2 := *h
	h2.meta = append(make([]byte, 0, len(h.meta)+64), h.meta...)
	h2.data = append(make([]byte, 0, len(h.data)+64), h.data...)
	h2.groups = append([]group(nil), h.groups...)
	h2.names = append([]string(nil), h.names...)
	return &h2
}

// appendLevel appends l as slog.Level.String writes it ("INFO", "WARN+2",
// "DEBUG-1"), without its allocation for the levels between names.
func appendLevel(dst []byte, l slog.Level) []byte {
	str := func(base string, v slog.Level) []byte {
		dst = append(dst, base...)
		if v == 0 {
			return dst
		}
		if v > 0 {
			dst = append(dst, '+')
		} else {
			dst = append(dst, '-')
			v = -v
		}
		return appendUint(dst, uint64(v))
	}
	switch {
	case l < slog.LevelInfo:
		return str("DEBUG", l-slog.LevelDebug)
	case l < slog.LevelWarn:
		return str("INFO", l-slog.LevelInfo)
	case l < slog.LevelError:
		return str("WARN", l-slog.LevelWarn)
	default:
		return str("ERROR", l-slog.LevelError)
	}
}

func appendUint(dst []byte, v uint64) []byte {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}
