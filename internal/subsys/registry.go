package subsys

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// parseCmd is user_event_parse_cmd + user_event_parse: split the command,
// check flags and privilege, look up an existing event with the same name
// and matching fields, or create one. On success the caller holds a
// reference it must put. Called with s.mu held.
func (s *Subsystem) parseCmd(cmd string, cred Cred, regFlags uint16) (*Event, error) {
	name, args, err := eventdef.SplitCommand(cmd)
	if err != nil {
		return nil, err
	}
	// user_event_capable: PERSIST needs CAP_PERFMON or CAP_SYS_ADMIN, checked
	// before the lookup, so even reusing an event needs it.
	if regFlags&RegPersist != 0 && !cred.PerfmonCapable {
		return nil, fmt.Errorf("persistent event %q needs CAP_PERFMON or CAP_SYS_ADMIN: %w", name, unix.EPERM)
	}
	if ev, err := s.find(name, args, regFlags); ev != nil || err != nil {
		return ev, err
	}
	return s.create(name, args, regFlags)
}

// find is find_user_event: scan the name's bucket for events of the same
// kind (a single-format request never sees a multi-format event and the
// reverse) and the same registered name. A single-format event whose fields
// do not match is EADDRINUSE; multi-format requests keep looking. A hit
// takes a reference.
func (s *Subsystem) find(name, args string, regFlags uint16) (*Event, error) {
	multi := regFlags&RegMultiFormat != 0
	for _, ev := range s.buckets[bucketOf(name)] {
		if ev.multi != multi || ev.def.Name != name {
			continue
		}
		if ev.def.MatchArgs(args) {
			ev.refs++
			return ev, nil
		}
		if !multi {
			return nil, fmt.Errorf("event %q exists with other fields (%s): %w", name, ev.def.AppendFields(nil), unix.EADDRINUSE)
		}
	}
	return nil, nil
}

// create makes a new event (the rest of user_event_parse): a multi-format
// event takes the next multi_id before its fields are parsed, so a failed
// registration uses one up too; then fields, the user_events_max limit, a
// type ID.
func (s *Subsystem) create(name, args string, regFlags uint16) (*Event, error) {
	ev := &Event{s: s, persist: regFlags&RegPersist != 0, multi: regFlags&RegMultiFormat != 0, counts: newCounts(s.opts.NumCPU)}
	ev.tp = name
	if ev.multi {
		ev.tp = eventdef.MultiName(name, s.multiID)
		s.multiID++
	}
	def, err := eventdef.ParseFields(name, args)
	if err != nil {
		return nil, err
	}
	ev.def = def
	if s.nEvents >= s.maxEv {
		return nil, fmt.Errorf("user_events_max (%d) events exist: %w", s.maxEv, unix.EMFILE)
	}
	id, ok := s.ids.get()
	if !ok {
		return nil, fmt.Errorf("no free trace event type ID: %w", unix.ENODEV)
	}
	ev.id = id
	// A persistent event keeps a reference of its own.
	ev.refs = 1
	if ev.persist {
		ev.refs = 2
	}
	b := bucketOf(name)
	s.buckets[b] = append([]*Event{ev}, s.buckets[b]...)
	s.created = append(s.created, ev)
	s.nEvents++
	s.trace.added(ev)
	s.followNew(ev)
	return ev, nil
}

// put drops a reference (user_event_put). A non-persistent event whose last
// reference goes is destroyed at once. Called with s.mu held.
func (s *Subsystem) put(ev *Event) {
	ev.refs--
	if ev.refs == 0 && !ev.persist {
		s.destroy(ev)
	}
}

// lastRef is user_event_last_ref: a persistent event is at its last
// reference at 1 (its own), a non-persistent one at 0 — which a live
// non-persistent event never is, so deleting one is always EBUSY.
func (ev *Event) lastRef() bool {
	if ev.persist {
		return ev.refs == 1
	}
	return ev.refs == 0
}

// destroy removes an event from the registry, tracefs and dynamic_events
// (destroy_user_event). Called with s.mu held.
func (s *Subsystem) destroy(ev *Event) {
	b := bucketOf(ev.def.Name)
	s.buckets[b] = removeEvent(s.buckets[b], ev)
	s.created = removeEvent(s.created, ev)
	s.nEvents--
	s.ids.put(ev.id)
	s.trace.removed(ev)
	ev.deleted = true
}

func removeEvent(list []*Event, ev *Event) []*Event {
	for i, e := range list {
		if e == ev {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// eachEvent calls fn for every event in user_events_status order: buckets
// 0..255, newest first within a bucket. Called with s.mu held.
func (s *Subsystem) eachEvent(fn func(*Event)) {
	for _, bucket := range s.buckets {
		for _, ev := range bucket {
			fn(ev)
		}
	}
}

// Events returns every event in user_events_status order.
func (s *Subsystem) Events() []*Event {
	s.mu.Lock()
	defer s.unlock()
	var out []*Event
	s.eachEvent(func(ev *Event) { out = append(out, ev) })
	return out
}

// Lookup returns the event tracefs shows as system/tracepoint, or nil.
func (s *Subsystem) Lookup(system, tracepoint string) *Event {
	s.mu.Lock()
	defer s.unlock()
	return s.lookupLocked(system, tracepoint)
}

func (s *Subsystem) lookupLocked(system, tracepoint string) *Event {
	for _, ev := range s.created {
		if ev.tp == tracepoint && ev.System() == system {
			return ev
		}
	}
	return nil
}

// deleteByName is DIAG_IOCSDEL's walk (delete_user_event): every event of
// the bucket whose registered name is name, single- and multi-format alike,
// in bucket order. The first one not at its last reference stops the walk
// with EBUSY (those deleted before stay deleted); a persistent one needs
// the privilege. No such event is ENOENT.
func (s *Subsystem) deleteByName(name string, cred Cred) error {
	found := false
	for _, ev := range append([]*Event(nil), s.buckets[bucketOf(name)]...) {
		if ev.def.Name != name {
			continue
		}
		found = true
		if !ev.lastRef() {
			return fmt.Errorf("delete %q: event %s is in use: %w", name, ev.tp, unix.EBUSY)
		}
		if ev.persist && !cred.PerfmonCapable {
			return fmt.Errorf("delete persistent event %q needs CAP_PERFMON or CAP_SYS_ADMIN: %w", name, unix.EPERM)
		}
		s.destroy(ev)
	}
	if !found {
		return fmt.Errorf("delete %q: no such event: %w", name, unix.ENOENT)
	}
	return nil
}

// Delete deletes the events registered as name, as DIAG_IOCSDEL does on any
// open user_events_data. name is the C string the caller passed; one of
// MaxCommandLen+1 bytes or more is EINVAL.
func (s *Subsystem) Delete(name string, cred Cred) error {
	if len(name) > eventdef.MaxCommandLen {
		return fmt.Errorf("delete: name of %d bytes is over %d: %w", len(name), eventdef.MaxCommandLen, unix.EINVAL)
	}
	s.mu.Lock()
	defer s.unlock()
	return s.deleteByName(name, cred)
}
