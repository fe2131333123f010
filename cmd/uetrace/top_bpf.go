package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/bpfcount"
	"github.com/uetrace/uetrace/internal/export/live"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// topSource is what top watches: a recording (perf's rings on the kernel,
// a session on the daemon) or, on the kernel, BPF counts.
type topSource interface {
	Run(ctx context.Context) error
	Stats() record.Stats
	Source() string
}

// bpfTop counts on the kernel with a BPF program (internal/bpfcount): the
// records are counted where they are written, per event and process, and
// nothing but the counts is read — no ring, no copy. It follows new
// events as record does, by available_events every FollowInterval.
type bpfTop struct {
	root string
	pats []record.Pattern
	c    *bpfcount.Counter

	mu       sync.Mutex
	events   map[uint32]record.EventStats // attached, by id (Samples filled in by Stats)
	attached map[string]bool              // "system:name"
	started  bool
	comms    map[uint32]string // last known comm of each pid
}

// newBPFTop loads the counter and attaches it to the events patterns
// select (every user event without any) that exist now.
func newBPFTop(root string, patterns []string) (*bpfTop, error) {
	if len(patterns) == 0 {
		patterns = record.DefaultEvents
	}
	b := &bpfTop{root: root, events: map[uint32]record.EventStats{}, attached: map[string]bool{}, comms: map[uint32]string{}}
	for _, p := range patterns {
		pat, err := record.ParsePattern(p)
		if err != nil {
			return nil, err
		}
		b.pats = append(b.pats, pat)
	}
	c, err := bpfcount.New(0)
	if err != nil {
		return nil, err
	}
	b.c = c
	if err := b.scan(); err != nil {
		c.Close()
		return nil, err
	}
	b.started = true
	return b, nil
}

// scan attaches the counter to every selected event not yet attached.
func (b *bpfTop) scan() error {
	text, err := os.ReadFile(filepath.Join(b.root, "available_events"))
	if err != nil {
		return fmt.Errorf("list events (available_events): %w", err)
	}
	for _, tp := range eventdef.ParseAvailableEvents(text) {
		full := tp.System + ":" + tp.Name
		if b.attached[full] || !eventdef.PathName(tp.Name) || !slices.ContainsFunc(b.pats, func(p record.Pattern) bool { return p.Match(tp.System, tp.Name) }) {
			continue
		}
		id, err := b.c.Attach(b.root, tp.System, tp.Name)
		if err != nil {
			// Gone between the list and the attach, as record finds too.
			continue
		}
		b.mu.Lock()
		b.attached[full] = true
		b.events[id] = record.EventStats{System: tp.System, Name: tp.Name, ID: int(id), Late: b.started}
		b.mu.Unlock()
	}
	return nil
}

// Run follows new events until ctx is done; then it detaches.
func (b *bpfTop) Run(ctx context.Context) error {
	defer b.c.Close()
	t := time.NewTicker(record.FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := b.scan(); err != nil {
				return err
			}
		}
	}
}

// Source says where the counts come from.
func (b *bpfTop) Source() string { return "kernel, counted in the kernel by BPF" }

// Stats are the counts so far: per event, per process, and the records
// the counter's full map could not count under their key (as lost).
func (b *bpfTop) Stats() record.Stats {
	counts, dropped, err := b.c.Counts()
	var st record.Stats
	if err != nil {
		return st
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	perEvent := map[uint32]uint64{}
	perPID := map[uint32]uint64{}
	for k, n := range counts {
		perEvent[k.ID] += n
		perPID[k.PID] += n
		st.Samples += n
	}
	for id, ev := range b.events {
		ev.Samples = perEvent[id]
		st.Events = append(st.Events, ev)
	}
	slices.SortFunc(st.Events, func(x, y record.EventStats) int { return x.ID - y.ID })
	for pid, n := range perPID {
		comm, ok := b.comms[pid]
		if c, err := procfs.Comm(int(pid)); err == nil {
			comm = c
			b.comms[pid] = comm
		} else if !ok {
			comm = "?"
		}
		st.Processes = append(st.Processes, record.ProcessStats{PID: pid, Comm: comm, Samples: n})
	}
	slices.SortFunc(st.Processes, func(x, y record.ProcessStats) int { return int(x.PID) - int(y.PID) })
	st.Lost = dropped
	return st
}

// openTopSource is the source top watches: BPF counts on the kernel when
// nothing asks for what only a recording does (--filter, --pid, --comm),
// BPF can be loaded, and --perf does not ask for perf's rings; else a
// recording, as record makes it. why says why BPF was not used, when it
// was tried.
func openTopSource(g *globals, a topArgs, opts record.Options) (src topSource, closeBackend func(), why string, err error) {
	filtered := slices.ContainsFunc(a.filters, func(f string) bool { return f != "" })
	if !a.perf && !filtered && len(a.pids) == 0 && len(a.comms) == 0 {
		if root, ok := kernelTracefs(g); ok {
			b, err := newBPFTop(root, a.events)
			if err == nil {
				return b, func() {}, "", nil
			}
			why = fmt.Sprintf("BPF counting unavailable (%v): counting through perf's rings", err)
		}
	}
	rec, closeBackend, err := openRecorder(g, nil, opts)
	if err != nil {
		return nil, nil, "", err
	}
	return rec, closeBackend, why, nil
}

// kernelTracefs is the kernel's tracefs when the backend is the kernel's
// (as openRecorder chooses it).
func kernelTracefs(g *globals) (string, bool) {
	o, err := g.options()
	if err != nil {
		return "", false
	}
	switch o.Backend {
	case userevents.Kernel:
		root, err := live.TracefsRoot(o.Tracefs)
		return root, err == nil
	case userevents.Auto:
		t, err := tracefs.Open(&userevents.Options{Backend: userevents.Kernel, Tracefs: o.Tracefs})
		if err != nil {
			return "", false
		}
		defer t.Close()
		return t.Root(), true
	}
	return "", false
}
