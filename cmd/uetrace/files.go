package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

func newCatCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cat PATH",
		Short: "Print a tracefs file (user_events_status, dynamic_events, events/.../format, trace, ...)",
		Long: `cat prints a file of the tracefs tree, the kernel's or the daemon's, by its
path relative to the tracefs root. trace_pipe streams until interrupted.`,
		Example: `  uetrace cat user_events_status
  uetrace cat events/user_events/myapp_request/format`,
		Args: exactArgs("PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return catFile(cmd, g, "cat", args[0], cmd.OutOrStdout())
		},
	}
}

// catFile copies a tracefs file to out until its end or an
// interrupt; its errors name op, the command the user gave.
func catFile(cmd *cobra.Command, g *globals, op, name string, out io.Writer) error {
	fs, err := g.tracefs()
	if err != nil {
		return err
	}
	defer fs.Close()
	f, err := fs.Open(name, os.O_RDONLY)
	if err != nil {
		return asOp(err, op, name, "")
	}
	ctx, stop := interruptible(cmd)
	defer stop()
	return asOp(copyUntil(ctx, out, f), op, name, "")
}

// copyUntil copies f to w until EOF or ctx is done (closing f ends a
// blocked read), then closes f.
func copyUntil(ctx context.Context, w io.Writer, f tracefs.File) error {
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	_, err := io.Copy(w, f)
	if ctx.Err() != nil {
		return nil
	}
	f.Close()
	return err
}

func newWriteCmd(g *globals) *cobra.Command {
	var trunc bool
	cmd := &cobra.Command{
		Use:   "write [--trunc] PATH TEXT",
		Short: "Write to a tracefs file: append, like >>, or with --trunc, like >",
		Long: `write writes TEXT to a file of the tracefs tree in one write, appending as the
shell's >> does; --trunc opens it with O_TRUNC as > does (on dynamic_events
that first deletes every event; on trace it clears the buffer). The text is
written as given: add a newline yourself where it matters. TEXT may begin
with '-': "uetrace write dynamic_events -:myev" deletes myev, as
"echo '-:myev' >> dynamic_events" does ("--" before it works too). A filter
the kernel refuses (events/*/*/filter) is reported with the text the filter
file shows then: the filter, a caret under the mistake and its message.`,
		Example: `  uetrace write dynamic_events 'u:myapp_request u32 status'
  uetrace write events/user_events/myapp_request/enable 1
  uetrace write events/user_events/myapp_request/filter 'status >= 500'
  uetrace write dynamic_events '-:myapp_request u32 status'
  uetrace write --trunc trace ''`,
		Args: exactArgs("PATH", "TEXT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, err := g.tracefs()
			if err != nil {
				return err
			}
			defer fs.Close()
			flag := os.O_APPEND
			if trunc {
				flag = os.O_TRUNC
			}
			err = fs.WriteFile(args[0], []byte(args[1]), flag)
			if errors.Is(err, unix.ENOENT) && path.Clean(strings.TrimPrefix(args[0], "/")) == "dynamic_events" {
				err = deleteHint(fs, args[1], err)
			}
			if err != nil && path.Base(args[0]) == "filter" {
				err = filterHint(fs, args[0], err)
			}
			return asOp(err, "write", "", "")
		},
	}
	cmd.Flags().BoolVar(&trunc, "trunc", false, "open with O_TRUNC, as the shell's > does")
	return cmd
}

// filterHint gives a refused filter the text the filter file shows after
// it (the kernel's, or the daemon's which is the same): the filter, a
// caret under the error and its message. On both backends the reason is
// then the same.
func filterHint(fs *tracefs.Tracefs, name string, err error) error {
	var ue *userevents.Error
	if !errors.As(err, &ue) {
		return err
	}
	text, rerr := readWhole(fs, name)
	if rerr != nil || !strings.Contains(text, "\nparse_error: ") && !strings.Contains(text, "\nError: (") {
		return err
	}
	ue.Reason = "the kernel says:\n" + strings.TrimRight(text, "\n")
	return err
}

// deleteHint explains an ENOENT from a dynamic_events delete ("!u:NAME
// ..." or "-:NAME ..."). The kernel deletes only an event whose fields
// the line lists exactly as its dynamic_events line does (user_fields_match
// on the tokens after the name, ';' not re-spaced): "!u:NAME" alone matches
// only an event without fields. The errno stays ENOENT; the reason says
// which event is there and how to name it.
func deleteHint(fs *tracefs.Tracefs, text string, err error) error {
	var ue *userevents.Error
	if !errors.As(err, &ue) {
		return err
	}
	existing, rerr := fs.ReadFile("dynamic_events")
	if rerr != nil {
		return err
	}
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		line, _, _ = strings.Cut(line, "#")
		if line == "" || (line[0] != '!' && line[0] != '-') {
			continue
		}
		dc, perr := eventdef.ParseDeleteCommand(line)
		if perr != nil {
			continue
		}
		var same []string
		matched := false
		for ex := range strings.Lines(string(existing)) {
			ex = strings.TrimSuffix(ex, "\n")
			cmdText, ok := strings.CutPrefix(ex, "u:")
			if !ok {
				continue
			}
			def, derr := eventdef.Parse(cmdText)
			if derr != nil || def.Name != dc.Name {
				continue
			}
			same = append(same, ex)
			matched = matched || dc.Matches(def)
		}
		if matched {
			continue // this line was not the one that failed
		}
		c := *ue
		switch {
		case dc.HasSystem && dc.System != eventdef.System && dc.System != eventdef.MultiSystem:
			c.Reason = fmt.Sprintf("no user event in system %q: user events are in %s or %s", dc.System, eventdef.System, eventdef.MultiSystem)
		case len(same) == 0:
			c.Reason = fmt.Sprintf("no event %s to delete", dc.Name)
		default:
			c.Reason = fmt.Sprintf("event %s exists, but a delete must list its fields exactly as its dynamic_events line does: %s (delete it with \"-:%s\")",
				dc.Name, strings.Join(same, ", "), strings.TrimPrefix(same[0], "u:"))
		}
		if strings.TrimSuffix(text, "\n") != line {
			c.Reason = fmt.Sprintf("line %q: %s", line, c.Reason)
		}
		return &c
	}
	return err
}
