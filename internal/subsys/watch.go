package subsys

import "slices"

// A FileWatch is told of a File's write indices and of their events'
// status, as they change: the daemon keeps, for each process that writes a
// file through the preloaded interposer, a table in shared memory from
// which the process answers its writes as the kernel would (EBADF while
// nothing is attached, EINVAL for a payload shorter than the fields) without
// asking. Linux has no such thing: a process asks the kernel at each write.
//
// Both methods are called with the subsystem's lock held: they must not
// block or call into the Subsystem (a store into memory the daemon mapped
// is what they are for).
type FileWatch interface {
	// Index is write index idx of the file: event ev, whose status is
	// status. It is called once per index, in index order — at Watch for
	// the indices the file has then, and for each one Register adds
	// afterwards before that Register returns, so that the index is known
	// to the watch before the registering process can write it.
	Index(idx uint32, ev *Event, status uint32)
	// Status is the new status of the event at idx (Status* bits; 0:
	// nothing attached; WatchSync while a synchronous consumer is
	// attached), at every change after its Index.
	Status(idx uint32, status uint32)
}

// WatchSync is the bit of a FileWatch's status (never of the event's own)
// that says a synchronous consumer is attached (SessionOptions.Synchronous):
// a writer must not defer the event's records.
const WatchSync = 1 << 31

// watchStatus is ev's status as FileWatches are told it. Called with s.mu
// held.
func (ev *Event) watchStatus() uint32 {
	st := ev.status.Load()
	if ev.syncUsers > 0 {
		st |= WatchSync
	}
	return st
}

// indexWatch is a FileWatch of the file that has an event at idx.
type indexWatch struct {
	w   FileWatch
	idx uint32
}

// Watch starts w on the file (see FileWatch) and returns what stops it.
// After stop returns, w is called no more. A closed file has no indices
// and is never watched.
func (f *File) Watch(w FileWatch) (stop func()) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return func() {}
	}
	f.watches = append(f.watches, w)
	evs := f.loadEvents()
	f.mu.Unlock()
	for i, ev := range evs {
		f.watchIndex(w, uint32(i), ev)
	}
	return func() { f.unwatch(w) }
}

// watchIndex tells w of index idx and keeps it told of ev's status. Called
// with s.mu held.
func (f *File) watchIndex(w FileWatch, idx uint32, ev *Event) {
	w.Index(idx, ev, ev.watchStatus())
	ev.watches = append(ev.watches, indexWatch{w, idx})
}

// unwatch stops w.
func (f *File) unwatch(w FileWatch) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	f.mu.Lock()
	f.watches = slices.DeleteFunc(f.watches, func(x FileWatch) bool { return x == w })
	evs := f.loadEvents()
	f.mu.Unlock()
	for _, ev := range evs {
		ev.unwatch(w)
	}
}

// unwatch forgets every watch of ev by w. Called with s.mu held.
func (ev *Event) unwatch(w FileWatch) {
	ev.watches = slices.DeleteFunc(ev.watches, func(x indexWatch) bool { return x.w == w })
	if len(ev.watches) == 0 {
		ev.watches = nil
	}
}

// notifyWatches tells ev's watches its status. Called with s.mu held.
func (ev *Event) notifyWatches(status uint32) {
	for _, x := range ev.watches {
		x.w.Status(x.idx, status)
	}
}

// loadEvents is the file's array of events, nil for none.
func (f *File) loadEvents() []*Event {
	if p := f.events.Load(); p != nil {
		return *p
	}
	return nil
}
