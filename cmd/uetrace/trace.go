package main

import (
	"os"

	"github.com/spf13/cobra"
)

func newTraceCmd(g *globals) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "trace [-f]",
		Short: "Print the trace buffer, or with -f follow it as records arrive",
		Long: `trace prints the ftrace buffer: the records of every enabled event, one line
each, as Linux prints them. -f reads trace_pipe instead, which consumes records
and waits for new ones until interrupted.`,
		Example: `  uetrace enable myapp_request
  uetrace trace -f`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, err := g.tracefs()
			if err != nil {
				return err
			}
			defer fs.Close()
			name := "trace"
			if follow {
				name = "trace_pipe"
			}
			f, err := fs.Open(name, os.O_RDONLY)
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd)
			defer stop()
			return copyUntil(ctx, cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow trace_pipe until interrupted")
	return cmd
}
