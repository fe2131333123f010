// Command uetrace shows and drives Linux user_events: on a kernel that has
// them, and through its own daemon where the kernel does not.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "uetrace: %v\n", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "uetrace",
		Short: "Linux user_events: register, enable, trace and record user-space trace events",
		Long: `uetrace works with Linux user_events, the kernel facility that lets a process
create trace events that ftrace, perf and eBPF can see.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDescribeCmd())
	return root
}
