package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

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
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return catFile(cmd, g, args[0]) },
	}
}

// catFile copies a tracefs file to the output until its end or an
// interrupt.
func catFile(cmd *cobra.Command, g *globals, name string) error {
	fs, err := g.tracefs()
	if err != nil {
		return err
	}
	defer fs.Close()
	f, err := fs.Open(name, os.O_RDONLY)
	if err != nil {
		return err
	}
	ctx, stop := interruptible(cmd)
	defer stop()
	return copyUntil(ctx, cmd.OutOrStdout(), f)
}

// copyUntil copies f to w until EOF or ctx is done (closing f ends a
// blocked read), then closes f.
func copyUntil(ctx context.Context, w io.Writer, f userevents.TracefsFile) error {
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
written as given: add a newline yourself where it matters.`,
		Example: `  uetrace write dynamic_events 'u:myapp_request u32 status'
  uetrace write events/user_events/myapp_request/enable 1
  uetrace write --trunc trace ''`,
		Args: cobra.ExactArgs(2),
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
			return fs.WriteFile(args[0], []byte(args[1]), flag)
		},
	}
	cmd.Flags().BoolVar(&trunc, "trunc", false, "open with O_TRUNC, as the shell's > does")
	return cmd
}
