package main

import (
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
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if follow {
				return catFile(cmd, g, "trace -f", "trace_pipe")
			}
			return catFile(cmd, g, "trace", "trace")
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow trace_pipe until interrupted")
	return cmd
}
