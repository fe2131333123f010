package subsys

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// writeBufSize is WRITE_BUFSIZE of trace_parse_run_command: dynamic_events
// text is taken in chunks of at most 4095 bytes, so a line may be 4095 bytes
// long with no newline, 4094 with one.
const writeBufSize = 4096

// AppendDynamicEvents appends the user-event lines of dynamic_events: one
// "u:<name>[ <fields>]" line per event in creation order, single- and
// multi-format alike, multi-format ones under their registered name.
// Other kinds of dynamic event (kprobes, synthetic events) do not exist
// here.
func (s *Subsystem) AppendDynamicEvents(dst []byte) []byte {
	s.mu.Lock()
	defer s.unlock()
	for _, ev := range s.created {
		dst = append(dst, "u:"...)
		dst = append(dst, ev.def.String()...)
		dst = append(dst, '\n')
	}
	return dst
}

// WriteDynamicEvents runs the commands in text as a write to dynamic_events
// does (trace_parse_run_command): line by line, each cut at '#'; an empty
// line does nothing; "u:<command>" creates a persistent event (or finds an
// existing one with the same fields); a line starting with '!' or '-'
// deletes (see eventdef.ParseDeleteCommand). The first failing line's error
// is returned and the lines before it stay applied. A line longer than the
// kernel's buffer, or text with a NUL byte, is EINVAL. On success it
// returns len(text).
//
// Only user events exist here: a line another dynamic event type would
// claim (kprobes' "p:", synthetic events...) is EINVAL, as on a kernel
// built without those types.
func (s *Subsystem) WriteDynamicEvents(text []byte, cred Cred) (int, error) {
	done, count := 0, len(text)
	for done < count {
		size := min(count-done, writeBufSize-1)
		chunk := text[done : done+size]
		// The chunk is a C string: it ends at a NUL.
		if i := bytes.IndexByte(chunk, 0); i >= 0 {
			chunk = chunk[:i]
		}
		buf := chunk
		for done < count {
			var line []byte
			if i := bytes.IndexByte(buf, '\n'); i >= 0 {
				line, size = buf[:i], i+1
			} else {
				line, size = buf, len(buf)
				if done+size < count {
					if len(buf) != len(chunk) {
						break // take the rest from a fresh chunk
					}
					return 0, fmt.Errorf("dynamic_events: line of %d bytes or more (or a NUL byte): lines must be under %d bytes: %w", size, writeBufSize-1, unix.EINVAL)
				}
			}
			done += size
			if i := bytes.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			if err := s.runDynamicCommand(string(line), cred); err != nil {
				return 0, err
			}
			buf = buf[size:]
		}
	}
	return count, nil
}

// runDynamicCommand is create_dyn_event for one line.
func (s *Subsystem) runDynamicCommand(line string, cred Cred) error {
	if line != "" && (line[0] == '-' || line[0] == '!') {
		return s.releaseDynamic(line, cred)
	}
	// The first dynamic event type (kprobes) takes a line with no words and
	// does nothing.
	if len(eventdef.ArgvSplit(line)) == 0 {
		return nil
	}
	cmd, ok := strings.CutPrefix(line, "u:")
	if !ok {
		return fmt.Errorf("dynamic_events %q: not a user event (\"u:name fields\") or a delete (\"!u:name fields\"): %w", line, unix.EINVAL)
	}
	s.mu.Lock()
	defer s.unlock()
	ev, err := s.parseCmd(eventdef.SkipSpaces(cmd), cred, RegPersist)
	if err != nil {
		return fmt.Errorf("dynamic_events %q: %w", line, err)
	}
	s.put(ev) // user_event_create puts its reference at once
	return nil
}

// releaseDynamic is dyn_event_release for user events: every event, in
// creation order, that the line names (by registered name, optional system
// and fields) is freed — EBUSY if it is in use, EPERM if it is persistent
// and the caller lacks the privilege, either stopping the walk. None
// matching is ENOENT. Then, whatever the outcome, the trace buffer is
// emptied if an event that was enabled has been removed since the last
// time (tracing_reset_all_online_cpus).
func (s *Subsystem) releaseDynamic(line string, cred Cred) error {
	dc, err := eventdef.ParseDeleteCommand(line)
	if err != nil {
		return fmt.Errorf("dynamic_events %q: %w", line, err)
	}
	s.mu.Lock()
	defer s.unlock()
	defer s.trace.resetIfArmed()
	err = unix.ENOENT
	for _, ev := range append([]*Event(nil), s.created...) {
		if !dc.Matches(ev.def) {
			continue
		}
		if err = s.free(ev, cred); err != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("dynamic_events %q: %w", line, err)
	}
	return nil
}

// free is user_event_free.
func (s *Subsystem) free(ev *Event, cred Cred) error {
	if !ev.lastRef() {
		return fmt.Errorf("event %s is in use: %w", ev.tp, unix.EBUSY)
	}
	if ev.persist && !cred.PerfmonCapable {
		return fmt.Errorf("deleting persistent event %s needs CAP_PERFMON or CAP_SYS_ADMIN: %w", ev.tp, unix.EPERM)
	}
	s.destroy(ev)
	return nil
}

// TruncateDynamicEvents is opening dynamic_events with O_TRUNC
// (dyn_events_release_all): if any event is in use — and every
// non-persistent event is — nothing is deleted and it is EBUSY; otherwise
// all are freed in creation order. Either way the trace buffer is then
// emptied if an event that was enabled has been removed.
func (s *Subsystem) TruncateDynamicEvents(cred Cred) error {
	s.mu.Lock()
	defer s.unlock()
	defer s.trace.resetIfArmed()
	for _, ev := range s.created {
		if !ev.lastRef() {
			return fmt.Errorf("dynamic_events: event %s is in use: %w", ev.tp, unix.EBUSY)
		}
	}
	for _, ev := range append([]*Event(nil), s.created...) {
		if err := s.free(ev, cred); err != nil {
			return fmt.Errorf("dynamic_events: %w", err)
		}
	}
	return nil
}
