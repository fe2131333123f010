package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/userevents"
)

// The CLI's errors read like the library's, `OP "INPUT": errno text
// (ERRNO): reason`, naming the command the user typed rather than the
// system call that failed under it: "enable nosuch", not "match nosuch";
// "cat nosuch", not "open nosuch". The errno is still there once, and
// errors.Is still finds it.

// asOp names the user's operation in err. A userevents.Error keeps its
// errno and reason and takes op for its operation; path and input, when
// not empty, replace the tracefs path and the input it names (the input
// the user gave is what they recognise). Other errors are left as they
// are.
func asOp(err error, op, path, input string) error {
	var e *userevents.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Op = op
	if path != "" || input != "" {
		c.Path, c.Input = path, input
	}
	return &c
}

// usageErr is a command line the command cannot take: EINVAL, in words.
func usageErr(cmd *cobra.Command, args []string, reason string) error {
	if len(args) > 0 {
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = strconv.Quote(a)
		}
		reason += " (" + strings.Join(q, " ") + ")"
	}
	return &usageError{op: cmd.Name(), reason: reason + "; see uetrace " + cmd.Name() + " --help"}
}

// usageError reads `status: invalid argument (EINVAL): takes no
// arguments ("x")` and wraps EINVAL.
type usageError struct{ op, reason string }

func (e *usageError) Error() string {
	return e.op + ": " + eventdef.ErrnoString(unix.EINVAL) + ": " + e.reason
}

func (e *usageError) Unwrap() error { return unix.EINVAL }

// noArgs, exactArgs and minArgs check the positional arguments as cobra's
// do, saying what the command takes in the words of its usage line.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr(cmd, args, "takes no arguments")
	}
	return nil
}

func exactArgs(what ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(what) {
			return usageErr(cmd, args, fmt.Sprintf("takes %s, got %d argument%s", strings.Join(what, " "), len(args), plural(len(args))))
		}
		return nil
	}
}

func minArgs(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageErr(cmd, args, "takes "+what+", got none")
		}
		return nil
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// reason is what err says without the errno text that the error it goes
// into prints itself: an eventdef.Error's detail, a userevents.Error's
// reason; anything else whole. So that a message names its errno once.
func reason(err error) string {
	var de *eventdef.Error
	if errors.As(err, &de) {
		return de.Detail()
	}
	var ue *userevents.Error
	if errors.As(err, &ue) && ue.Reason != "" {
		return ue.Reason
	}
	return err.Error()
}
