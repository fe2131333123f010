package tracefilter

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// Code is the kernel's FILT_ERR_* number: the index of the error's text in
// err_text[] (kernel/trace/trace_events_filter.c).
type Code uint8

// The kernel's parse errors, in its order.
const (
	ErrNone              Code = iota // "No error"
	ErrInvalidOp                     // "Invalid operator"
	ErrTooManyOpen                   // "Too many '('"
	ErrTooManyClose                  // "Too few '('"
	ErrMissingQuote                  // "Missing matching quote"
	ErrMissingBraceOpen              // "Missing '{'"
	ErrMissingBraceClose             // "Missing '}'"
	ErrOperandTooLong                // "Operand too long"
	ErrExpectString                  // "Expecting string field"
	ErrExpectDigit                   // "Expecting numeric field"
	ErrIllegalFieldOp                // "Illegal operation for field type"
	ErrFieldNotFound                 // "Field not found"
	ErrIllegalIntval                 // "Illegal integer value"
	ErrBadSubsysFilter               // "Couldn't find or set field in one of a subsystem's events"
	ErrTooManyPreds                  // "Too many terms in predicate expression"
	ErrInvalidFilter                 // "Meaningless filter expression"
	ErrInvalidCPUList                // "Invalid cpulist"
	ErrIPFieldOnly                   // "Only 'ip' field is supported for function trace"
	ErrInvalidValue                  // "Invalid value (did you forget quotes)?"
	ErrNoFunction                    // "Function not found"
	ErrErrno                         // "Error"
	ErrNoFilter                      // "No filter found"
)

var errText = [...]string{
	"No error",
	"Invalid operator",
	"Too many '('",
	"Too few '('",
	"Missing matching quote",
	"Missing '{'",
	"Missing '}'",
	"Operand too long",
	"Expecting string field",
	"Expecting numeric field",
	"Illegal operation for field type",
	"Field not found",
	"Illegal integer value",
	"Couldn't find or set field in one of a subsystem's events",
	"Too many terms in predicate expression",
	"Meaningless filter expression",
	"Invalid cpulist",
	"Only 'ip' field is supported for function trace",
	"Invalid value (did you forget quotes)?",
	"Function not found",
	"Error",
	"No filter found",
}

// Text is the kernel's err_text for the code.
func (c Code) Text() string {
	if int(c) < len(errText) {
		return errText[c]
	}
	return "unknown error " + strconv.Itoa(int(c))
}

// Error is a filter the kernel would refuse.
type Error struct {
	// Errno is what the write(2) of the filter (or PERF_EVENT_IOC_SET_FILTER)
	// returns. It is EINVAL for most errors, but the kernel passes some
	// internal return values through as they are: -1 (EPERM) when a term
	// has no field name or is followed by junk, -2 (ENOENT) for an unclosed
	// '(' found by the first scan, -3 (ESRCH) for a missing quote found by it.
	Errno unix.Errno
	// Code is the parse error the kernel recorded; ErrNone when it recorded
	// none (then the filter file shows "Error: (0)").
	Code Code
	// Pos is the kernel's lasterr_pos: the byte offset the error's caret
	// points at in error_log (the filter file clamps it to the filter's
	// length).
	Pos int
	// Filter is the filter text as the kernel kept it.
	Filter string
}

func (e *Error) Error() string {
	if e.Code == ErrNone {
		return "trace filter " + strconv.Quote(e.Filter) + ": " + e.Errno.Error() +
			" (" + unix.ErrnoName(e.Errno) + "): see the kernel's filter syntax in Documentation/trace/events.rst"
	}
	return "trace filter " + strconv.Quote(e.Filter) + ": " + e.Code.Text() + " at byte " + strconv.Itoa(e.Pos) +
		" (" + unix.ErrnoName(e.Errno) + ")"
}

// Unwrap makes errors.Is(err, unix.EINVAL) and the like work.
func (e *Error) Unwrap() error { return e.Errno }

// traceSeqBufferSize is TRACE_SEQ_BUFFER_SIZE on x86_64: 8192 minus the
// seq_buf, readpos and full members of struct trace_seq. The kernel builds
// the error text and the filter file's contents in one; what does not fit
// is left out whole (trace_seq_puts, trace_seq_printf).
const traceSeqBufferSize = 8192 - (24 + 8 + 4)

// traceSeq is the part of struct trace_seq the filter code uses.
type traceSeq struct {
	buf  []byte
	full bool
}

// puts is trace_seq_puts: all of str if it fits in what is left, else
// nothing and the sequence is full.
func (s *traceSeq) puts(str string) {
	if s.full {
		return
	}
	if len(str) > traceSeqBufferSize-len(s.buf) {
		s.full = true
		return
	}
	s.buf = append(s.buf, str...)
}

// printf is trace_seq_printf of an already formatted str: vsnprintf must
// leave room for its NUL.
func (s *traceSeq) printf(str string) {
	if s.full {
		return
	}
	if len(s.buf)+len(str) >= traceSeqBufferSize {
		s.full = true
		return
	}
	s.buf = append(s.buf, str...)
}

// errorText is what append_filter_err makes of the filter text: the
// filter, then a caret line and the error's text, which the filter file
// shows (print_event_filter adds the final newline).
func (e *Error) errorText() string {
	var s traceSeq
	pos := e.Pos
	if pos > len(e.Filter) {
		pos = len(e.Filter)
	}
	// "indexing is off by one"
	if pos != 0 {
		pos++
	}
	s.puts(e.Filter)
	if e.Code != ErrNone {
		w := pos - 1
		if w < 0 {
			w = 0
		}
		s.printf("\n" + spaces(w) + "^")
		s.printf("\nparse_error: " + e.Code.Text() + "\n")
	} else {
		s.printf("\nError: (0)\n")
	}
	// trace_seq_putc(s, 0) and kmemdup_nul: the text ends at the first NUL,
	// which the filter cannot contain.
	return string(s.buf)
}

func spaces(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = ' '
	}
	return string(b)
}

// logPos is the caret position error_log shows: lasterr_pos, unclamped,
// and 0 for an error without a code (FILT_ERR_ERRNO).
func (e *Error) logCode() (Code, int) {
	if e.Code == ErrNone {
		return ErrErrno, 0
	}
	return e.Code, e.Pos
}

// AppendErrorLog appends the entry the kernel adds to error_log for this
// error (tracing_log_err with "event filter parse error"), as
// tracing_err_log_seq_show prints it, with the time stamp ts given in
// nanoseconds of local_clock:
//
//	[   12.345678] event filter parse error: error: Field not found
//	  Command: x == 1
//	            ^
func (e *Error) AppendErrorLog(dst []byte, ts uint64) []byte {
	code, pos := e.logCode()
	return appendLogEntry(dst, ts, code, uint16(pos), e.Filter)
}

func appendLogEntry(dst []byte, ts uint64, code Code, pos uint16, cmd string) []byte {
	sec, nsec := ts/1e9, ts%1e9
	dst = append(dst, '[')
	s := strconv.FormatUint(sec, 10)
	for i := len(s); i < 5; i++ {
		dst = append(dst, ' ')
	}
	dst = append(dst, s...)
	dst = append(dst, '.')
	us := strconv.FormatUint(nsec/1000, 10)
	for i := len(us); i < 6; i++ {
		dst = append(dst, '0')
	}
	dst = append(dst, us...)
	dst = append(dst, "] event filter parse error: error: "...)
	dst = append(dst, code.Text()...)
	dst = append(dst, "\n  Command: "...)
	dst = append(dst, cmd...)
	dst = append(dst, '\n')
	for i := 0; i < len("  Command: ")+int(pos); i++ {
		dst = append(dst, ' ')
	}
	return append(dst, "^\n"...)
}
