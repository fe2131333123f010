package ehotel

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/userevents"
)

// sink is what the log and span writers share: the provider, user_events
// under it, why it may write nothing, and the stop.
type sink struct {
	name     string
	file     *userevents.File
	ownsFile bool
	provider *ehprovider.Provider // nil when user_events could not be opened: err says why
	err      error
	stopped  atomic.Bool
	stop     sync.Once
}

// open validates the provider name and sets the provider up on c's file,
// or on user_events opened with userevents.Open(nil).
// That user_events cannot be opened is no error — as in Rust, telemetry
// must not fail for want of a listener —: the sink then has no provider
// and err says why. A bad name, or a provider that cannot be made, is.
func (s *sink) open(name string, c config) error {
	if err := validateName(name); err != nil {
		return err
	}
	s.name, s.file = name, c.file
	if s.file == nil {
		f, err := userevents.Open(nil)
		if err != nil {
			s.err = fmt.Errorf("ehotel: provider %s writes nothing: open user_events: %w", name, err)
			return nil
		}
		s.file, s.ownsFile = f, true
	}
	p, err := ehprovider.New(s.file, name, nil)
	if err != nil {
		s.closeFile()
		return fmt.Errorf("ehotel: %w", err)
	}
	s.provider = p
	return nil
}

// validateName checks a provider name as the Rust builders do: 1 to 233
// ASCII letters, digits and underscores.
func validateName(name string) error {
	if name == "" {
		return fmt.Errorf("ehotel: provider name is empty: %w", unix.EINVAL)
	}
	if len(name) >= maxProviderName {
		return fmt.Errorf("ehotel: provider name of %d bytes, must be less than %d: %w", len(name), maxProviderName, unix.EINVAL)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Errorf("ehotel: provider name %q: only ASCII letters, digits and '_' are allowed: %w", name, unix.EINVAL)
		}
	}
	return nil
}

// Err says why some or all records cannot be written — user_events could
// not be opened, a tracepoint not registered — or nil.
func (s *sink) Err() error { return s.err }

// Name is the provider name.
func (s *sink) Name() string { return s.name }

// shutdown stops writing, unregisters the provider's tracepoints (as the
// Rust exporters' shutdown does) and closes user_events if the sink opened
// it; the second time it does nothing.
func (s *sink) shutdown() {
	s.stop.Do(func() {
		s.stopped.Store(true)
		if s.provider != nil {
			s.provider.Close()
		}
		s.closeFile()
	})
}

func (s *sink) closeFile() {
	if s.ownsFile && s.file != nil {
		s.file.Close()
	}
}

// resourceFields is what a record's resource contributes to its event,
// worked out once per resource (the Rust exporters' set_resource).
type resourceFields struct {
	res                  *resource.Resource
	role, instance       string
	hasRole, hasInstance bool
	attrs                []attribute.KeyValue // the opted-in ones, in key order
}

// resourceCache keeps the fields of the last resource seen: a program has
// one, so this is computed once.
type resourceCache struct {
	keys map[string]bool // Options.ResourceAttributes
	cur  atomic.Pointer[resourceFields]
}

func (c *resourceCache) fields(res *resource.Resource) *resourceFields {
	if rf := c.cur.Load(); rf != nil && rf.res == res {
		return rf
	}
	rf := &resourceFields{res: res}
	for it := res.Iter(); it.Next(); {
		kv := it.Attribute()
		switch kv.Key {
		case "service.name":
			rf.role, rf.hasRole = kv.Value.String(), true
		case "service.instance.id":
			rf.instance, rf.hasInstance = kv.Value.String(), true
		default:
			if c.keys[string(kv.Key)] {
				rf.attrs = append(rf.attrs, kv)
			}
		}
	}
	c.cur.Store(rf)
	return rf
}
