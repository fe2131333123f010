// Package uerror is the errors of uetrace's public packages (userevents,
// tracefs): one type, *Error, saying what was done, to what, the errno
// Linux (or the daemon, with Linux's rules) returned, and in words why —
// and the wording, once, of the errors of each backend. The public
// packages name its types (userevents.Error, userevents.NoBackendError).
package uerror

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// Error is a failed operation: what was done, to what, the errno the
// kernel (or the daemon, with the kernel's rules) returned, and in words why
// when that is known. errors.Is(err, unix.EINVAL) works on it.
type Error struct {
	Op     string     // "register", "write", "delete", "open", ...
	Path   string     // the tracefs file, when there is one
	Input  string     // the command, name or text written
	Errno  unix.Errno // what the kernel returns
	Reason string     // why, when known
	Ret    int64      // a non-errno return of DIAG_IOCSREG (the struct-size quirk), else 0
}

// Error reads like `write dynamic_events "u:x u32 a ": invalid argument
// (EINVAL): field 1 ...`.
func (e *Error) Error() string {
	b := []byte(e.Op)
	if e.Path != "" {
		b = append(append(b, ' '), e.Path...)
	}
	if e.Input != "" || e.Path == "" {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, e.Input)
	}
	b = append(b, ": "...)
	if e.Ret != 0 {
		b = append(b, "kernel return value "...)
		b = strconv.AppendInt(b, e.Ret, 10)
	} else {
		b = append(b, eventdef.ErrnoString(e.Errno)...)
	}
	if e.Reason != "" {
		b = append(append(b, ": "...), e.Reason...)
	}
	return string(b)
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// Wrap turns a backend's error into an *Error. The reason comes from
// the backend's own words (the daemon's), else from eventdef when the
// command is what was wrong.
func Wrap(op, path, input string, err error) error {
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	e := &Error{Op: op, Path: path, Input: input}
	if ret, ok := errors.AsType[abi.RetError](err); ok {
		e.Ret = int64(ret)
	} else if pe, ok := errors.AsType[*eventdef.Error](err); ok {
		e.Errno = pe.Errno
		e.Reason = pe.Detail()
		if pe.Errno > 4095 {
			e.Ret, e.Errno = -int64(pe.Errno), 0
		}
	} else if re, ok := errors.AsType[*wire.RemoteError](err); ok {
		e.Errno = re.Errno
		e.Reason = ReasonOf(re.Text, e)
	} else {
		if pathErr, ok := errors.AsType[*fs.PathError](err); ok {
			err = pathErr.Err
		}
		e.Errno = ErrnoOf(err)
		if !errors.Is(err, e.Errno) || err.Error() != e.Errno.Error() {
			e.Reason = ReasonOf(err.Error(), e)
		}
	}
	if e.Errno == unix.EINVAL && e.Reason == "" {
		e.Reason = Diagnose(op, path, input)
	}
	return e
}

// ReasonOf strips from a message what Error adds again: the operation, the
// path and input, and the errno text.
func ReasonOf(text string, e *Error) string {
	errno := e.Errno
	text = strings.TrimSuffix(text, ": "+errno.Error())
	text = strings.TrimSuffix(text, errno.Error())
	if before, after, ok := strings.Cut(text, eventdef.ErrnoString(errno)+": "); ok {
		text = before + after
	}
	for _, p := range []string{e.Op + " " + e.Path + ": ", e.Path + " " + strconv.Quote(e.Input) + ": ", e.Op + " " + strconv.Quote(e.Input) + ": ", e.Op + ": ", e.Path + ": "} {
		text = strings.TrimPrefix(text, p)
	}
	return strings.TrimSuffix(text, ": ")
}

// Diagnose explains an EINVAL from the kernel, which says nothing more:
// eventdef parses the command the way the kernel does and names the field
// and the rule.
func Diagnose(op, path, input string) string {
	var cmds []string
	switch {
	case op == "register":
		cmds = []string{input}
	case path == "dynamic_events":
		// As trace_parse_run_command and user_event_create read it: lines
		// cut at '#', "u:" at the start, then only leading spaces skipped —
		// a trailing space is a field of its own, and EINVAL.
		for line := range strings.Lines(input) {
			line = strings.TrimSuffix(line, "\n")
			line, _, _ = strings.Cut(line, "#")
			if c, ok := strings.CutPrefix(line, "u:"); ok {
				cmds = append(cmds, strings.TrimLeft(c, " \t"))
			}
		}
	}
	for _, c := range cmds {
		if _, err := eventdef.Parse(c); err != nil {
			if pe, ok := errors.AsType[*eventdef.Error](err); ok {
				return pe.Detail()
			}
		}
	}
	return ""
}

// ErrnoOf is the errno err wraps: EIO when none (wire.ErrnoOf, the
// daemon's rule for what it answers).
func ErrnoOf(err error) unix.Errno { return wire.ErrnoOf(err) }

// NoBackend explains why Auto found nothing, and what to do about it. A
// daemon that is there but refuses this user is the answer itself: its
// error says whom to ask.
func NoBackend(kerr, derr error) error {
	if isClientAnswer(derr) {
		return derr
	}
	hint := ""
	if errors.Is(kerr, unix.EACCES) || errors.Is(kerr, unix.EPERM) {
		// The kernel's error says whether it has user_events, when that
		// can be known (kernelfs); the daemon's says how to start one.
		hint = "where the kernel has user_events, run as root or give this user access to tracefs"
	}
	return &NoBackendError{Kernel: kerr, Daemon: derr, Hint: hint}
}

// isClientAnswer says whether err is a client.PermissionError or
// IdentityError: one that says whose socket it is and what to do.
func isClientAnswer(err error) bool {
	_, pe := errors.AsType[*client.PermissionError](err)
	_, ie := errors.AsType[*client.IdentityError](err)
	return pe || ie
}

// NoBackendError is Auto's failure: neither backend could be opened.
type NoBackendError struct {
	Kernel, Daemon error
	Hint           string // what the user can do, when the causes do not say
}

func (e *NoBackendError) Error() string {
	s := "no user_events: kernel: " + e.Kernel.Error() + "; daemon: " + e.Daemon.Error()
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Unwrap returns both causes.
func (e *NoBackendError) Unwrap() []error { return []error{e.Kernel, e.Daemon} }

// Dial words a failed connection to the daemon at sock: with what to
// do when no daemon answers there. A client.PermissionError or
// IdentityError already says whose socket it is and what to do, and is
// returned as it is.
func Dial(sock string, err error) error {
	if isClientAnswer(err) {
		return err
	}
	if sock == "" {
		sock = wire.DefaultSocket()
	}
	e := &Error{Op: "connect", Path: sock, Errno: ErrnoOf(err)}
	switch e.Errno {
	case unix.ENOENT, unix.ECONNREFUSED:
		e.Reason = "no uetrace daemon there: start one with `uetrace serve`"
	default:
		e.Reason = ReasonOf(strings.TrimPrefix(err.Error(), "dial "+sock+": "), e)
	}
	return e
}
