// Package client is the uetrace daemon's client: a connection to
// `uetrace serve` (Dial) that is one open user_events_data there —
// DIAG_IOCSREG, DIAG_IOCSUNREG, DIAG_IOCSDEL and writev as requests, and a
// shared-memory ring for writes without a system call — plus its tracefs
// files and perf-like sessions, read through replies or a ring of their
// own. It speaks package wire; it checks before it sends anything that the
// daemon runs as a user it trusts (IdentityError).
//
// It is what a producer links to reach the daemon (package userevents) and
// what the tools read sessions with; it is not the server (package daemon).
package client
