package ehprovider

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/userevents"
)

// Provider is a named source of EventHeader events: the tracepoints
// "<name>_L<level>K<keyword>[G<group>]" it has been asked for, registered
// through one userevents.File. It is safe for concurrent use.
type Provider struct {
	f     *userevents.File
	name  string
	group string

	// tps is replaced, never changed, so that lookups take no lock;
	// mu serializes the replacements and registrations.
	tps    atomic.Pointer[tpTable]
	mu     sync.Mutex
	closed bool
	err    error
}

// tpTable holds the registered tracepoints by level, then keyword: a
// program uses a few keywords per level, so a scan beats hashing.
type tpTable [256][]*Tracepoint

func (t *tpTable) find(level eventheader.Level, keyword uint64) *Tracepoint {
	for _, tp := range t[level] {
		if tp.keyword == keyword {
			return tp
		}
	}
	return nil
}

// Options configures a Provider, as slog.HandlerOptions does a handler:
// nil is the zero Options, the defaults.
type Options struct {
	// Group puts the provider in a provider group: its tracepoints are
	// named "<name>_L<level>K<keyword>G<group>" (the C library's
	// EHD_PROVIDER_OPTIONS "G..."). A group is lowercase letters and
	// digits; "" is none.
	Group string
}

// New returns the provider name writing through f. It registers nothing
// yet: each tracepoint is registered when first asked for (Tracepoint,
// Define0 ... Define6). The name follows eventheader.ValidateProvider;
// only [A-Za-z0-9_] is portable to every tracefs.
func New(f *userevents.File, name string, opts *Options) (*Provider, error) {
	if f == nil {
		return nil, errors.New("ehprovider: New needs an open userevents.File")
	}
	p := &Provider{f: f, name: name}
	p.tps.Store(new(tpTable))
	if opts != nil {
		p.group = opts.Group
	}
	if err := eventheader.ValidateProvider(name); err != nil {
		return nil, err
	}
	tn := eventheader.TracepointName{Provider: name, Level: eventheader.LevelInformation}
	if p.group != "" {
		tn.Options = "G" + p.group
	}
	if err := tn.Validate(); err != nil {
		return nil, fmt.Errorf("ehprovider: group %q: %w", p.group, err)
	}
	return p, nil
}

// Name is the provider's name.
func (p *Provider) Name() string { return p.name }

// Group is the provider's group, or "".
func (p *Provider) Group() string { return p.group }

// Tracepoint returns the provider's tracepoint for level and keyword,
// registering it on first use ("MyProvider_L4K1 u8 eventheader_flags; ...").
// It never returns nil: a tracepoint that could not be registered — an
// invalid level, the backend refusing, the provider closed — is never
// enabled, and says why with Err (so does Provider.Err). Events of the same
// level and keyword share their tracepoint, as in the C library.
func (p *Provider) Tracepoint(level eventheader.Level, keyword uint64) *Tracepoint {
	if tp := p.tps.Load().find(level, keyword); tp != nil {
		return tp
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if tp := p.tps.Load().find(level, keyword); tp != nil {
		return tp
	}
	tn := eventheader.TracepointName{Provider: p.name, Level: level, Keyword: keyword}
	if p.group != "" {
		tn.Options = "G" + p.group
	}
	tp := &Tracepoint{name: tn.String(), level: level, keyword: keyword}
	switch err := tn.Validate(); {
	case p.closed:
		tp.err = fmt.Errorf("ehprovider: %s: the provider is closed", tp.name)
	case err != nil:
		tp.err = fmt.Errorf("ehprovider: %s: %w", tp.name, err)
	default:
		ev, err := p.f.Register(tn.Command(), 0)
		if err != nil {
			tp.err = fmt.Errorf("ehprovider: register %s: %w", tp.name, err)
		} else {
			tp.ev = ev
		}
	}
	if tp.err != nil && p.err == nil {
		p.err = tp.err
	}
	if !p.closed {
		t := *p.tps.Load()
		t[level] = append(t[level][:len(t[level]):len(t[level])], tp)
		p.tps.Store(&t)
	}
	return tp
}

// Enabled reports whether the provider's tracepoint for level and keyword
// is enabled, without registering it: false when nothing has asked for it
// yet (so nothing can be attached to it). It takes no lock; a Tracepoint's
// own Enabled is cheaper still.
func (p *Provider) Enabled(level eventheader.Level, keyword uint64) bool {
	tp := p.tps.Load().find(level, keyword)
	return tp != nil && tp.Enabled()
}

// Err returns the first error registering one of the provider's
// tracepoints, or nil.
func (p *Provider) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close unregisters the provider's tracepoints: they, and the events
// defined on them, are disabled from now on. It does not close the File.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, tps := range p.tps.Load() {
		for _, tp := range tps {
			if tp.ev != nil {
				errs = append(errs, tp.ev.Close())
			}
		}
	}
	p.tps.Store(new(tpTable))
	return errors.Join(errs...)
}

// Tracepoint is one of a provider's tracepoints: the events of one level
// and keyword. Check Enabled before building an event for it.
type Tracepoint struct {
	ev      *userevents.Event // nil when registration failed
	name    string
	level   eventheader.Level
	keyword uint64
	err     error
}

// Enabled reports whether anything is attached to the tracepoint: the
// userevents enable word's atomic load and a bit test, nothing else.
func (tp *Tracepoint) Enabled() bool {
	return tp.ev != nil && tp.ev.Enabled()
}

// Name is the tracepoint's name, "<provider>_L<level>K<keyword>[G<group>]".
func (tp *Tracepoint) Name() string { return tp.name }

// Level and Keyword are the tracepoint's level and keyword.
func (tp *Tracepoint) Level() eventheader.Level { return tp.level }

// Keyword is the tracepoint's keyword bits.
func (tp *Tracepoint) Keyword() uint64 { return tp.keyword }

// Err says why the tracepoint could not be registered, or nil.
func (tp *Tracepoint) Err() error { return tp.err }

// Event is the userevents registration behind the tracepoint, or nil when
// it could not be registered.
func (tp *Tracepoint) Event() *userevents.Event { return tp.ev }

// Write writes the event b holds, which must have been Reset for tp, in
// one writev: the write index, then the event. It does nothing and returns
// nil while the tracepoint is disabled; a disable racing with it may make
// it return the backend's EBADF, which callers can ignore.
func (tp *Tracepoint) Write(b *Builder) error {
	if !tp.Enabled() {
		return nil
	}
	if b.tp != tp {
		return fmt.Errorf("ehprovider: write to %s of an event built for another tracepoint: Reset the Builder with this one", tp.name)
	}
	// The event in three pieces, written together without a copy.
	prefix, meta, data, err := b.Builder.Parts(b.buf[:0])
	b.buf = prefix
	if err != nil {
		return err
	}
	return tp.ev.Write(prefix, meta, data)
}

// Builder builds one dynamic event at a time for Tracepoint.Write: an
// eventheader.Builder (all its Add and Append methods) and the buffer the
// event is written from. Reuse one per goroutine: after the first events
// it allocates nothing. Not safe for concurrent use.
type Builder struct {
	eventheader.Builder
	tp  *Tracepoint
	buf []byte
}

// Reset starts an event named name ("name" or "name;attr=value") for tp,
// with opcode Info and no id, version or tag.
func (b *Builder) Reset(tp *Tracepoint, name string) {
	b.ResetHeader(tp, name, eventheader.Header{})
}

// ResetHeader is Reset with the header's id, version, tag and opcode;
// h.Level and h.Flags are ignored (the level is tp's).
func (b *Builder) ResetHeader(tp *Tracepoint, name string, h eventheader.Header) {
	h.Level = tp.level
	b.tp = tp
	b.Builder.Reset(name, h)
}
