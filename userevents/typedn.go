// The six typed event types are alike: change them together.

package userevents

import "reflect"

// Event1 is an event of one field written from Go values of types A:
// see Define1.
type Event1[A Value] struct{ t typed }

// Define1 registers cmd on f, as Register does without flags, as an event
// whose one field are set from Go values of types A, in order. It checks
// first that each type fits its field (see Value): EINVAL, saying which
// field and why, when one does not or when the command has not 1 fields.
func Define1[A Value](f *File, cmd string) (*Event1[A], error) {
	t, err := define(f, cmd, "Define1", reflect.TypeFor[A]())
	if err != nil {
		return nil, err
	}
	return &Event1[A]{t}, nil
}

// Write writes one record of the event from the values, when anything is
// attached; while nothing is, or once the event is closed, it returns nil
// at once, having built nothing.
// The payload is built on the stack: a record of up to 512 bytes
// allocates nothing. A string longer than its char[N] field is EINVAL,
// loc data past the loc word's 16 bits E2BIG; the backend's errors are
// Event.Write's, but for a disable that races with the check, which
// drops the record without error.
func (ev *Event1[A]) Write(a A) error {
	if !ev.t.ev.Enabled() {
		return nil
	}
	return ev.write(a)
}

// write is Write once enabled: apart, so that a disabled Write does not
// zero the payload's stack space.
func (ev *Event1[A]) write(a A) error {
	var stack [stackPayload]byte
	buf := ev.t.start(stack[:0])
	var err error
	if buf, err = put(buf, &ev.t.fields[0], a); err != nil {
		return err
	}
	return ev.t.write(buf)
}

// Enabled reports whether anything is attached to the event: one load and
// a bit test (Event.Enabled), inlined into the caller. Write checks it
// itself (a call: some 2 ns); check it first to skip computing the values,
// or on the hottest paths.
func (ev *Event1[A]) Enabled() bool { return ev.t.ev.Enabled() }

// Event is the registered event, for what Event1 does not cover:
// Command, Def, WriteIndex, Dropped.
func (ev *Event1[A]) Event() *Event { return ev.t.ev }

// Close unregisters the event (Event.Close).
func (ev *Event1[A]) Close() error { return ev.t.ev.Close() }

// Event2 is an event of 2 fields written from Go values of types A, B:
// see Define2.
type Event2[A, B Value] struct{ t typed }

// Define2 registers cmd on f, as Register does without flags, as an event
// whose 2 fields are set from Go values of types A, B, in order. It checks
// first that each type fits its field (see Value): EINVAL, saying which
// field and why, when one does not or when the command has not 2 fields.
func Define2[A, B Value](f *File, cmd string) (*Event2[A, B], error) {
	t, err := define(f, cmd, "Define2", reflect.TypeFor[A](), reflect.TypeFor[B]())
	if err != nil {
		return nil, err
	}
	return &Event2[A, B]{t}, nil
}

// Write writes one record of the event from the values, when anything is
// attached; while nothing is, or once the event is closed, it returns nil
// at once, having built nothing.
// The payload is built on the stack: a record of up to 512 bytes
// allocates nothing. A string longer than its char[N] field is EINVAL,
// loc data past the loc word's 16 bits E2BIG; the backend's errors are
// Event.Write's, but for a disable that races with the check, which
// drops the record without error.
func (ev *Event2[A, B]) Write(a A, b B) error {
	if !ev.t.ev.Enabled() {
		return nil
	}
	return ev.write(a, b)
}

// write is Write once enabled: apart, so that a disabled Write does not
// zero the payload's stack space.
func (ev *Event2[A, B]) write(a A, b B) error {
	var stack [stackPayload]byte
	buf := ev.t.start(stack[:0])
	var err error
	if buf, err = put(buf, &ev.t.fields[0], a); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[1], b); err != nil {
		return err
	}
	return ev.t.write(buf)
}

// Enabled reports whether anything is attached to the event: one load and
// a bit test (Event.Enabled), inlined into the caller. Write checks it
// itself (a call: some 2 ns); check it first to skip computing the values,
// or on the hottest paths.
func (ev *Event2[A, B]) Enabled() bool { return ev.t.ev.Enabled() }

// Event is the registered event, for what Event2 does not cover:
// Command, Def, WriteIndex, Dropped.
func (ev *Event2[A, B]) Event() *Event { return ev.t.ev }

// Close unregisters the event (Event.Close).
func (ev *Event2[A, B]) Close() error { return ev.t.ev.Close() }

// Event3 is an event of 3 fields written from Go values of types A, B, C:
// see Define3.
type Event3[A, B, C Value] struct{ t typed }

// Define3 registers cmd on f, as Register does without flags, as an event
// whose 3 fields are set from Go values of types A, B, C, in order. It checks
// first that each type fits its field (see Value): EINVAL, saying which
// field and why, when one does not or when the command has not 3 fields.
func Define3[A, B, C Value](f *File, cmd string) (*Event3[A, B, C], error) {
	t, err := define(f, cmd, "Define3", reflect.TypeFor[A](), reflect.TypeFor[B](), reflect.TypeFor[C]())
	if err != nil {
		return nil, err
	}
	return &Event3[A, B, C]{t}, nil
}

// Write writes one record of the event from the values, when anything is
// attached; while nothing is, or once the event is closed, it returns nil
// at once, having built nothing.
// The payload is built on the stack: a record of up to 512 bytes
// allocates nothing. A string longer than its char[N] field is EINVAL,
// loc data past the loc word's 16 bits E2BIG; the backend's errors are
// Event.Write's, but for a disable that races with the check, which
// drops the record without error.
func (ev *Event3[A, B, C]) Write(a A, b B, c C) error {
	if !ev.t.ev.Enabled() {
		return nil
	}
	return ev.write(a, b, c)
}

// write is Write once enabled: apart, so that a disabled Write does not
// zero the payload's stack space.
func (ev *Event3[A, B, C]) write(a A, b B, c C) error {
	var stack [stackPayload]byte
	buf := ev.t.start(stack[:0])
	var err error
	if buf, err = put(buf, &ev.t.fields[0], a); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[1], b); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[2], c); err != nil {
		return err
	}
	return ev.t.write(buf)
}

// Enabled reports whether anything is attached to the event: one load and
// a bit test (Event.Enabled), inlined into the caller. Write checks it
// itself (a call: some 2 ns); check it first to skip computing the values,
// or on the hottest paths.
func (ev *Event3[A, B, C]) Enabled() bool { return ev.t.ev.Enabled() }

// Event is the registered event, for what Event3 does not cover:
// Command, Def, WriteIndex, Dropped.
func (ev *Event3[A, B, C]) Event() *Event { return ev.t.ev }

// Close unregisters the event (Event.Close).
func (ev *Event3[A, B, C]) Close() error { return ev.t.ev.Close() }

// Event4 is an event of 4 fields written from Go values of types A, B, C, D:
// see Define4.
type Event4[A, B, C, D Value] struct{ t typed }

// Define4 registers cmd on f, as Register does without flags, as an event
// whose 4 fields are set from Go values of types A, B, C, D, in order. It checks
// first that each type fits its field (see Value): EINVAL, saying which
// field and why, when one does not or when the command has not 4 fields.
func Define4[A, B, C, D Value](f *File, cmd string) (*Event4[A, B, C, D], error) {
	t, err := define(f, cmd, "Define4", reflect.TypeFor[A](), reflect.TypeFor[B](), reflect.TypeFor[C](), reflect.TypeFor[D]())
	if err != nil {
		return nil, err
	}
	return &Event4[A, B, C, D]{t}, nil
}

// Write writes one record of the event from the values, when anything is
// attached; while nothing is, or once the event is closed, it returns nil
// at once, having built nothing.
// The payload is built on the stack: a record of up to 512 bytes
// allocates nothing. A string longer than its char[N] field is EINVAL,
// loc data past the loc word's 16 bits E2BIG; the backend's errors are
// Event.Write's, but for a disable that races with the check, which
// drops the record without error.
func (ev *Event4[A, B, C, D]) Write(a A, b B, c C, d D) error {
	if !ev.t.ev.Enabled() {
		return nil
	}
	return ev.write(a, b, c, d)
}

// write is Write once enabled: apart, so that a disabled Write does not
// zero the payload's stack space.
func (ev *Event4[A, B, C, D]) write(a A, b B, c C, d D) error {
	var stack [stackPayload]byte
	buf := ev.t.start(stack[:0])
	var err error
	if buf, err = put(buf, &ev.t.fields[0], a); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[1], b); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[2], c); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[3], d); err != nil {
		return err
	}
	return ev.t.write(buf)
}

// Enabled reports whether anything is attached to the event: one load and
// a bit test (Event.Enabled), inlined into the caller. Write checks it
// itself (a call: some 2 ns); check it first to skip computing the values,
// or on the hottest paths.
func (ev *Event4[A, B, C, D]) Enabled() bool { return ev.t.ev.Enabled() }

// Event is the registered event, for what Event4 does not cover:
// Command, Def, WriteIndex, Dropped.
func (ev *Event4[A, B, C, D]) Event() *Event { return ev.t.ev }

// Close unregisters the event (Event.Close).
func (ev *Event4[A, B, C, D]) Close() error { return ev.t.ev.Close() }

// Event5 is an event of 5 fields written from Go values of types A, B, C, D, E:
// see Define5.
type Event5[A, B, C, D, E Value] struct{ t typed }

// Define5 registers cmd on f, as Register does without flags, as an event
// whose 5 fields are set from Go values of types A, B, C, D, E, in order. It checks
// first that each type fits its field (see Value): EINVAL, saying which
// field and why, when one does not or when the command has not 5 fields.
func Define5[A, B, C, D, E Value](f *File, cmd string) (*Event5[A, B, C, D, E], error) {
	t, err := define(f, cmd, "Define5", reflect.TypeFor[A](), reflect.TypeFor[B](), reflect.TypeFor[C](), reflect.TypeFor[D](), reflect.TypeFor[E]())
	if err != nil {
		return nil, err
	}
	return &Event5[A, B, C, D, E]{t}, nil
}

// Write writes one record of the event from the values, when anything is
// attached; while nothing is, or once the event is closed, it returns nil
// at once, having built nothing.
// The payload is built on the stack: a record of up to 512 bytes
// allocates nothing. A string longer than its char[N] field is EINVAL,
// loc data past the loc word's 16 bits E2BIG; the backend's errors are
// Event.Write's, but for a disable that races with the check, which
// drops the record without error.
func (ev *Event5[A, B, C, D, E]) Write(a A, b B, c C, d D, e E) error {
	if !ev.t.ev.Enabled() {
		return nil
	}
	return ev.write(a, b, c, d, e)
}

// write is Write once enabled: apart, so that a disabled Write does not
// zero the payload's stack space.
func (ev *Event5[A, B, C, D, E]) write(a A, b B, c C, d D, e E) error {
	var stack [stackPayload]byte
	buf := ev.t.start(stack[:0])
	var err error
	if buf, err = put(buf, &ev.t.fields[0], a); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[1], b); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[2], c); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[3], d); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[4], e); err != nil {
		return err
	}
	return ev.t.write(buf)
}

// Enabled reports whether anything is attached to the event: one load and
// a bit test (Event.Enabled), inlined into the caller. Write checks it
// itself (a call: some 2 ns); check it first to skip computing the values,
// or on the hottest paths.
func (ev *Event5[A, B, C, D, E]) Enabled() bool { return ev.t.ev.Enabled() }

// Event is the registered event, for what Event5 does not cover:
// Command, Def, WriteIndex, Dropped.
func (ev *Event5[A, B, C, D, E]) Event() *Event { return ev.t.ev }

// Close unregisters the event (Event.Close).
func (ev *Event5[A, B, C, D, E]) Close() error { return ev.t.ev.Close() }

// Event6 is an event of 6 fields written from Go values of types A, B, C, D, E, F:
// see Define6.
type Event6[A, B, C, D, E, F Value] struct{ t typed }

// Define6 registers cmd on f, as Register does without flags, as an event
// whose 6 fields are set from Go values of types A, B, C, D, E, F, in order. It checks
// first that each type fits its field (see Value): EINVAL, saying which
// field and why, when one does not or when the command has not 6 fields.
func Define6[A, B, C, D, E, F Value](f *File, cmd string) (*Event6[A, B, C, D, E, F], error) {
	t, err := define(f, cmd, "Define6", reflect.TypeFor[A](), reflect.TypeFor[B](), reflect.TypeFor[C](), reflect.TypeFor[D](), reflect.TypeFor[E](), reflect.TypeFor[F]())
	if err != nil {
		return nil, err
	}
	return &Event6[A, B, C, D, E, F]{t}, nil
}

// Write writes one record of the event from the values, when anything is
// attached; while nothing is, or once the event is closed, it returns nil
// at once, having built nothing.
// The payload is built on the stack: a record of up to 512 bytes
// allocates nothing. A string longer than its char[N] field is EINVAL,
// loc data past the loc word's 16 bits E2BIG; the backend's errors are
// Event.Write's, but for a disable that races with the check, which
// drops the record without error.
func (ev *Event6[A, B, C, D, E, F]) Write(a A, b B, c C, d D, e E, f F) error {
	if !ev.t.ev.Enabled() {
		return nil
	}
	return ev.write(a, b, c, d, e, f)
}

// write is Write once enabled: apart, so that a disabled Write does not
// zero the payload's stack space.
func (ev *Event6[A, B, C, D, E, F]) write(a A, b B, c C, d D, e E, f F) error {
	var stack [stackPayload]byte
	buf := ev.t.start(stack[:0])
	var err error
	if buf, err = put(buf, &ev.t.fields[0], a); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[1], b); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[2], c); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[3], d); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[4], e); err != nil {
		return err
	}
	if buf, err = put(buf, &ev.t.fields[5], f); err != nil {
		return err
	}
	return ev.t.write(buf)
}

// Enabled reports whether anything is attached to the event: one load and
// a bit test (Event.Enabled), inlined into the caller. Write checks it
// itself (a call: some 2 ns); check it first to skip computing the values,
// or on the hottest paths.
func (ev *Event6[A, B, C, D, E, F]) Enabled() bool { return ev.t.ev.Enabled() }

// Event is the registered event, for what Event6 does not cover:
// Command, Def, WriteIndex, Dropped.
func (ev *Event6[A, B, C, D, E, F]) Event() *Event { return ev.t.ev }

// Close unregisters the event (Event.Close).
func (ev *Event6[A, B, C, D, E, F]) Close() error { return ev.t.ev.Close() }
