package userevents

import (
	"errors"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
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

// wrapErr turns a backend's error into an *Error. The reason comes from
// the backend's own words (the daemon's), else from eventdef when the
// command is what was wrong.
func wrapErr(op, path, input string, err error) error {
	var ue *Error
	if errors.As(err, &ue) {
		return err
	}
	e := &Error{Op: op, Path: path, Input: input}
	var ret abi.RetError
	var pe *eventdef.Error
	var re *wire.RemoteError
	switch {
	case errors.As(err, &ret):
		e.Ret = int64(ret)
	case errors.As(err, &pe):
		e.Errno = pe.Errno
		e.Reason = pe.Detail()
		if pe.Errno > 4095 {
			e.Ret, e.Errno = -int64(pe.Errno), 0
		}
	case errors.As(err, &re):
		e.Errno = re.Errno
		e.Reason = reasonOf(re.Text, e)
	default:
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		e.Errno = errnoOf(err)
		if !errors.Is(err, e.Errno) || err.Error() != e.Errno.Error() {
			e.Reason = reasonOf(err.Error(), e)
		}
	}
	if e.Errno == unix.EINVAL && e.Reason == "" {
		e.Reason = diagnose(op, path, input)
	}
	return e
}

// reasonOf strips from a message what Error adds again: the operation, the
// path and input, and the errno text.
func reasonOf(text string, e *Error) string {
	errno := e.Errno
	text = strings.TrimSuffix(text, ": "+errno.Error())
	text = strings.TrimSuffix(text, errno.Error())
	text = strings.Replace(text, eventdef.ErrnoString(errno)+": ", "", 1)
	for _, p := range []string{e.Op + " " + e.Path + ": ", e.Path + " " + strconv.Quote(e.Input) + ": ", e.Op + " " + strconv.Quote(e.Input) + ": ", e.Op + ": ", e.Path + ": "} {
		text = strings.TrimPrefix(text, p)
	}
	return strings.TrimSuffix(text, ": ")
}

// diagnose explains an EINVAL from the kernel, which says nothing more:
// eventdef parses the command the way the kernel does and names the field
// and the rule.
func diagnose(op, path, input string) string {
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
			var pe *eventdef.Error
			if errors.As(err, &pe) {
				return pe.Detail()
			}
		}
	}
	return ""
}

// errnoOf is the errno err wraps: EIO when none.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return unix.EIO
}
