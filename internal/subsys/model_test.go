package subsys

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// A state-machine test: random register / unregister / delete / write /
// enable / perf session / open / close / fork / exec sequences against a
// small reference model of which events exist, what holds them, and what
// every enable bit must read.

type mEvent struct {
	fields   string
	persist  bool
	ftrace   bool
	sessions int
}

type mProc struct {
	mem      *fakeMem
	p        *Process
	enablers map[int]string // slot → event name
}

type mFile struct {
	f      *File
	events []string
}

type mSession struct {
	ss   *Session
	name string
}

// The (address, bit) pairs processes register at: two bits of one u32, a
// second word, and the upper half of the first word.
var slots = []struct {
	addr uint64
	bit  uint8
}{{check, 0}, {check, 1}, {check + 8, 0}, {check + 4, 3}}

var (
	names     = []string{"a", "b"}
	fieldSets = []string{"u32 x", "u64 x"}
)

type machine struct {
	s        *Subsystem
	events   map[string]*mEvent
	procs    []*mProc
	files    []*mFile
	sessions []*mSession
}

func (m *machine) refs(name string) int {
	ev := m.events[name]
	n := 0
	for _, f := range m.files {
		if f != nil && slices.Contains(f.events, name) {
			n++
		}
	}
	for _, p := range m.procs {
		if p == nil {
			continue
		}
		for _, en := range p.enablers {
			if en == name {
				n++
			}
		}
	}
	if ev.ftrace {
		n++
	}
	if ev.sessions > 0 {
		n++
	}
	return n
}

func (m *machine) enabled(name string) bool {
	ev := m.events[name]
	return ev != nil && (ev.ftrace || ev.sessions > 0)
}

// collect deletes model events nothing holds, as the last put does.
func (m *machine) collect() {
	for name, ev := range m.events {
		if !ev.persist && m.refs(name) == 0 {
			delete(m.events, name)
		}
	}
}

func expect(t *rapid.T, what string, err error, want unix.Errno) {
	if want == 0 && err != nil || want != 0 && !errors.Is(err, want) {
		t.Fatalf("%s: got %v, model says %s", what, err, unix.ErrnoName(want))
	}
}

func (m *machine) Register(t *rapid.T) {
	pi := rapid.IntRange(0, len(m.procs)-1).Draw(t, "proc")
	fi := rapid.IntRange(0, len(m.files)-1).Draw(t, "file")
	slot := rapid.IntRange(0, len(slots)-1).Draw(t, "slot")
	name := rapid.SampledFrom(names).Draw(t, "name")
	fields := rapid.SampledFrom(fieldSets).Draw(t, "fields")
	persist := rapid.Bool().Draw(t, "persist")
	cap := rapid.Float64().Draw(t, "cap") < 0.8
	p, f := m.procs[pi], m.files[fi]
	if p == nil || f == nil {
		t.Skip("no such process or file")
	}
	var flags uint16
	if persist {
		flags = RegPersist
	}
	what := fmt.Sprintf("register %q persist=%v cap=%v at slot %d", name+" "+fields, persist, cap, slot)
	idx, err := f.f.Register(p.p, Cred{PerfmonCapable: cap}, regArgs(name+" "+fields, slots[slot].addr, slots[slot].bit, 4, flags))
	want := unix.Errno(0)
	ev := m.events[name]
	switch {
	case p.enablers[slot] != "":
		want = unix.EADDRINUSE
	case persist && !cap:
		want = unix.EPERM
	case ev != nil && ev.fields != fields:
		want = unix.EADDRINUSE
	}
	expect(t, what, err, want)
	if want != 0 {
		return
	}
	if ev == nil {
		m.events[name] = &mEvent{fields: fields, persist: persist}
	}
	if !slices.Contains(f.events, name) {
		f.events = append(f.events, name)
	}
	if int(idx) != slices.Index(f.events, name) {
		t.Fatalf("%s: write index %d, model %d", what, idx, slices.Index(f.events, name))
	}
	p.enablers[slot] = name
}

func (m *machine) Unregister(t *rapid.T) {
	pi := rapid.IntRange(0, len(m.procs)-1).Draw(t, "proc")
	slot := rapid.IntRange(0, len(slots)-1).Draw(t, "slot")
	p := m.procs[pi]
	if p == nil {
		t.Skip("no such process")
	}
	f := m.s.Open()
	err := f.Unregister(p.p, unregArgs(slots[slot].addr, slots[slot].bit))
	f.Close()
	if p.enablers[slot] == "" {
		expect(t, "unregister", err, unix.ENOENT)
		return
	}
	expect(t, "unregister", err, 0)
	delete(p.enablers, slot)
	if p.mem.u32(slots[slot].addr)&(1<<slots[slot].bit) != 0 {
		t.Fatal("unregister left the bit set")
	}
	m.collect()
}

func (m *machine) Delete(t *rapid.T) {
	name := rapid.SampledFrom(names).Draw(t, "name")
	cap := rapid.Float64().Draw(t, "cap") < 0.8
	err := m.s.Delete(name, Cred{PerfmonCapable: cap})
	ev := m.events[name]
	switch {
	case ev == nil:
		expect(t, "delete", err, unix.ENOENT)
	case !ev.persist || m.refs(name) > 0:
		expect(t, "delete", err, unix.EBUSY)
	case !cap:
		expect(t, "delete", err, unix.EPERM)
	default:
		expect(t, "delete", err, 0)
		delete(m.events, name)
	}
}

func (m *machine) Write(t *rapid.T) {
	fi := rapid.IntRange(0, len(m.files)-1).Draw(t, "file")
	idx := rapid.IntRange(0, 2).Draw(t, "index")
	f := m.files[fi]
	if f == nil {
		t.Skip("no such file")
	}
	payload := make([]byte, 8)
	_, err := f.f.Writev(w0, le32(uint32(idx)), payload)
	switch {
	case idx >= len(f.events):
		expect(t, "write", err, unix.ENOENT)
	case !m.enabled(f.events[idx]):
		expect(t, "write", err, unix.EBADF)
	default:
		expect(t, "write", err, 0)
	}
}

func (m *machine) Enable(t *rapid.T) {
	name := rapid.SampledFrom(names).Draw(t, "name")
	on := rapid.Bool().Draw(t, "on")
	v := "0"
	if on {
		v = "1"
	}
	err := m.s.FS().WriteFile("events/user_events/"+name+"/enable", []byte(v), 0, root)
	ev := m.events[name]
	if ev == nil {
		expect(t, "enable", err, unix.ENOENT)
		return
	}
	expect(t, "enable", err, 0)
	ev.ftrace = on
	m.collect()
}

func (m *machine) Perf(t *rapid.T) {
	if rapid.Bool().Draw(t, "open") {
		name := rapid.SampledFrom(names).Draw(t, "name")
		ev := m.s.Lookup("user_events", name)
		if (ev == nil) != (m.events[name] == nil) {
			t.Fatalf("event %q: exists %v, model %v", name, ev != nil, m.events[name] != nil)
		}
		if ev == nil {
			t.Skip("no event to attach to")
		}
		ss := m.s.NewSession(SessionOptions{BufferBytes: 4096})
		if err := ss.Attach(ev); err != nil {
			t.Fatal(err)
		}
		m.sessions = append(m.sessions, &mSession{ss, name})
		m.events[name].sessions++
		return
	}
	if len(m.sessions) == 0 {
		t.Skip("no session")
	}
	i := rapid.IntRange(0, len(m.sessions)-1).Draw(t, "session")
	ms := m.sessions[i]
	ms.ss.Close()
	m.sessions = slices.Delete(m.sessions, i, i+1)
	m.events[ms.name].sessions--
	m.collect()
}

func (m *machine) OpenClose(t *rapid.T) {
	fi := rapid.IntRange(0, len(m.files)-1).Draw(t, "file")
	if f := m.files[fi]; f != nil {
		f.f.Close()
		m.files[fi] = nil
		m.collect()
		return
	}
	m.files[fi] = &mFile{f: m.s.Open()}
}

func (m *machine) Fork(t *rapid.T) {
	src := rapid.IntRange(0, len(m.procs)-1).Draw(t, "parent")
	dst := rapid.IntRange(0, len(m.procs)-1).Draw(t, "child")
	parent := m.procs[src]
	if parent == nil || src == dst {
		t.Skip("no parent")
	}
	if old := m.procs[dst]; old != nil {
		old.p.Release() // the process in that slot exits first
	}
	mem := parent.mem.fork()
	child := &mProc{mem: mem, p: parent.p.Fork(mem), enablers: make(map[int]string)}
	for k, v := range parent.enablers {
		child.enablers[k] = v
	}
	m.procs[dst] = child
	m.collect()
}

func (m *machine) Exec(t *rapid.T) {
	pi := rapid.IntRange(0, len(m.procs)-1).Draw(t, "proc")
	p := m.procs[pi]
	if p == nil {
		t.Skip("no such process")
	}
	p.p.Release()
	p.enablers = make(map[int]string)
	p.mem = newMem()
	p.p = m.s.NewProcess(p.mem)
	m.collect()
}

func (m *machine) Check(t *rapid.T) {
	// The events that exist, their persistence and what uses them.
	var want []string
	for name, ev := range m.events {
		line := name
		if st := m.enabled(name); st {
			line += " # Used by"
			if ev.ftrace {
				line += " ftrace"
			}
			if ev.sessions > 0 {
				line += " perf"
			}
		}
		want = append(want, line)
	}
	var got []string
	for _, l := range strings.Split(string(m.s.AppendStatus(nil)), "\n") {
		if l == "" {
			break
		}
		got = append(got, l)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("user_events_status %q, model %q", got, want)
	}
	for name, ev := range m.events {
		if e := m.s.Lookup("user_events", name); e.Persistent() != ev.persist {
			t.Fatalf("event %q persistent %v, model %v", name, e.Persistent(), ev.persist)
		}
	}
	// Every registered bit reads the event's state.
	for pi, p := range m.procs {
		if p == nil {
			continue
		}
		for slot, name := range p.enablers {
			set := p.mem.u32(slots[slot].addr)&(1<<slots[slot].bit) != 0
			if set != m.enabled(name) {
				t.Fatalf("process %d slot %d (%s): bit %v, model %v", pi, slot, name, set, m.enabled(name))
			}
		}
	}
}

func TestStateMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := New(Options{})
		m := &machine{s: s, events: map[string]*mEvent{}, procs: make([]*mProc, 3), files: make([]*mFile, 3)}
		for i := range 2 {
			mem := newMem()
			m.procs[i] = &mProc{mem: mem, p: s.NewProcess(mem), enablers: map[int]string{}}
			m.files[i] = &mFile{f: s.Open()}
		}
		t.Repeat(rapid.StateMachineActions(m))
	})
}
