package userevents

import "github.com/uetrace/uetrace/internal/uerror"

// Error is a failed operation: Op ("register", "write", "delete", "open",
// …), the tracefs Path when there is one, the Input (the command, name or
// text written), the Errno the kernel returns — or the daemon, with the
// kernel's rules — the Reason in words when it is known, and Ret, a
// return of DIAG_IOCSREG that is no errno (the struct-size quirk).
// errors.Is(err, unix.EINVAL) works on it; it reads like
// `register "x u32 a ": invalid argument (EINVAL): field 1 …`. Package
// tracefs returns it too.
type Error = uerror.Error

// NoBackendError is Auto's failure: neither the kernel's user_events nor a
// daemon could be opened. Kernel and Daemon are the two causes, Hint what
// the user can do when they do not say.
type NoBackendError = uerror.NoBackendError
