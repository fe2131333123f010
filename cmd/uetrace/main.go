// Command uetrace shows and drives Linux user_events: on a kernel that has
// them, and through its own daemon (uetrace serve) where the kernel does not.
// It is what uetrace ships; programs that create events use package
// userevents instead, and the kernel-oracle tooling (kernel/, conformance/)
// is no part of it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == runShimArg {
		runShim(os.Args[2:])
	}
	root := newRootCmd()
	root.SetArgs(dataArgs(root, os.Args[1:]))
	err := root.ExecuteContext(context.Background())
	var es *exitStatus
	if errors.As(err, &es) {
		es.exit()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "uetrace: %v\n", err)
		os.Exit(1)
	}
}

// exitStatus is how uetrace ends that is not an error of its own: the exit
// code of a command it ran, or death by a signal, passed on as perf passes
// on its workload's.
type exitStatus struct {
	code   int
	signal syscall.Signal
}

func (e *exitStatus) Error() string {
	if e.signal != 0 {
		return "killed by " + unix.SignalName(e.signal)
	}
	return "exit status " + strconv.Itoa(e.code)
}

// exit ends the process with the status: by raising the signal with its
// default action, so that a shell sees "killed by SIGINT" as it would of
// the command itself (and stops a script on Ctrl-C), or with the code.
//
// The action is set with rt_sigaction directly: the Go runtime's own
// handler ignores a signal nobody asked for with signal.Notify (SIGUSR1,
// say) instead of dying of it. A zeroed struct sigaction is SIG_DFL, no
// flags and an empty mask on every architecture.
func (e *exitStatus) exit() {
	if e.signal != 0 {
		var dfl [4]uint64
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(e.signal), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		unix.Kill(os.Getpid(), e.signal)
		// Delivery is asynchronous when this thread blocks the signal;
		// should it not come, the shell's convention says the same.
		time.Sleep(time.Second)
		os.Exit(128 + int(e.signal))
	}
	os.Exit(e.code)
}

// unknownCommand is the error for a first word that is no command: it
// names the nearest commands, as git does, and where the list is.
func unknownCommand(root *cobra.Command, name string) error {
	hint := ""
	root.SuggestionsMinimumDistance = 2 // cobra's own default, which SuggestionsFor does not apply
	if s := root.SuggestionsFor(name); len(s) > 0 {
		hint = " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return &usageError{op: "unknown command " + strconv.Quote(name) + hint, reason: "uetrace --help lists the commands"}
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
working without either.

Arguments that begin with '-' are data where a command takes data — the
text of write, the COMMAND of register, emit and describe, a NAME, a pattern:
"uetrace write dynamic_events -:myev" deletes myev as the kernel's own syntax
does. Only the command's own flags are taken as flags, before or after the
data; "--" ends them: after it every argument is data, even one spelt like a
flag ("uetrace write dynamic_events -- '-:myev'").`,
		Version: version(),
		// A word that is no command gets an error that points to the
		// list, not cobra's bare "unknown command"; uetrace alone prints
		// the help.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
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
		newExportCmd(g),
		newTopCmd(g),
		newReportCmd(),
		newEmitCmd(g),
		newRunCmd(g),
		newMountCmd(g),
		newPreloadCmd(g),
		newDemoCmd(),
		newVersionCmd(),
	)
	// A flag the command does not have is a usage error in the CLI's
	// words, naming the command, like every other: "write: invalid
	// argument (EINVAL): unknown flag: --trnc; see uetrace write --help".
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageErr(cmd, nil, err.Error())
	})
	return root
}
