package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// globals are the flags every command takes.
type globals struct {
	backend string
	socket  string
}

func (g *globals) register(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.StringVar(&g.backend, "backend", "auto", "where user_events are: auto, kernel, daemon or inprocess")
	pf.StringVar(&g.socket, "socket", "", "the daemon's socket (default $UETRACE_SOCKET, else /run/uetrace/uetrace.sock for root, else $XDG_RUNTIME_DIR/uetrace/uetrace.sock)")
}

// socketPath is the daemon's socket the flags name.
func (g *globals) socketPath() string {
	if g.socket != "" {
		return g.socket
	}
	return wire.DefaultSocket()
}

// inprocess is the backend "inprocess": one subsystem in this process, for
// every command run in it (the tests run several).
var inprocess = sync.OnceValue(func() *inproc.Kernel {
	return inproc.New(subsys.New(subsys.Options{NumCPU: runtime.NumCPU()}))
})

func (g *globals) options() (userevents.Options, error) {
	if g.backend == "inprocess" {
		return *inprocess().Options(), nil
	}
	b, err := userevents.ParseBackend(g.backend)
	if err != nil {
		err = &userevents.Error{Op: "backend", Input: g.backend, Errno: unix.EINVAL, Reason: "unknown backend: want auto, kernel, daemon or inprocess"}
		return userevents.Options{}, asOp(err, "--backend", "", g.backend)
	}
	return userevents.Options{Backend: b, Socket: g.socket}, nil
}

func (g *globals) tracefs() (*tracefs.Tracefs, error) {
	o, err := g.options()
	if err != nil {
		return nil, err
	}
	if o.OpenData != nil {
		return inprocess().Tracefs(), nil
	}
	return tracefs.Open(&o)
}

func (g *globals) file() (*userevents.File, error) {
	o, err := g.options()
	if err != nil {
		return nil, err
	}
	return userevents.Open(&o)
}

// interruptible is the command's context, cancelled by SIGINT or SIGTERM.
func interruptible(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}
