// Command uetrace shows and drives Linux user_events: on a kernel that has
// them, and through its own daemon where the kernel does not.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "uetrace: %v\n", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "uetrace",
		Short: "Linux user_events: register, enable, trace and record user-space trace events",
		Long: `uetrace works with Linux user_events, the kernel facility that lets a process
create trace events that ftrace, perf and eBPF can see.

On a kernel built with CONFIG_USER_EVENTS it uses the kernel's tracefs; on one
without (most distribution kernels) it talks to a uetrace daemon, started with
"uetrace serve". --backend chooses; the default takes the kernel when it has
user_events and the daemon otherwise. "uetrace demo" shows the whole system
working without either.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g := &globals{}
	g.register(root)
	root.AddCommand(
		newDescribeCmd(),
		newServeCmd(g),
		newStatusCmd(g),
		newCatCmd(g),
		newWriteCmd(g),
		newRegisterCmd(g),
		newDeleteCmd(g),
		newEnableCmd(g, true),
		newEnableCmd(g, false),
		newTraceCmd(g),
		newRecordCmd(g),
		newTopCmd(g),
		newReportCmd(),
		newEmitCmd(g),
		newDemoCmd(),
	)
	return root
}
