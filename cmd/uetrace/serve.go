package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/uetrace/uetrace/daemon"
	"github.com/uetrace/uetrace/subsys"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		maxEvents int
		bufferKB  int
		verbose   bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve user_events to the programs of this machine from a daemon",
		Long: `serve runs the user_events subsystem in this process and serves it on a Unix
socket (mode 0660), for kernels without CONFIG_USER_EVENTS. Programs using the
userevents package register and write events through it; uetrace's other
commands read and write its tracefs tree. A client that exits releases its
events as process exit does in Linux. SIGINT or SIGTERM stops it.`,
		Example: `  uetrace serve &
  uetrace status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sock := g.socket
			if sock == "" {
				sock = daemon.DefaultSocket()
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ln, err := daemon.Listen(sock)
			if err != nil {
				return err
			}
			sys := subsys.New(subsys.Options{MaxEvents: maxEvents, NumCPU: runtime.NumCPU(), BufferKB: bufferKB})
			srv := daemon.New(daemon.Config{Subsystem: sys, Logger: log})
			ctx, stop := interruptible(cmd)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			log.Info("serving user_events", "socket", sock, "pid", os.Getpid())
			select {
			case <-ctx.Done():
				log.Info("stopping", "clients", srv.Conns())
				srv.Close()
				<-done
				os.Remove(sock)
				return nil
			case err := <-done:
				srv.Close()
				os.Remove(sock)
				if err != nil {
					return fmt.Errorf("serve %s: %w", sock, err)
				}
				return nil
			}
		},
	}
	cmd.Flags().IntVar(&maxEvents, "max-events", 0, "user_events_max: how many events may exist (default 32768)")
	cmd.Flags().IntVar(&bufferKB, "buffer-kb", 0, "trace buffer per CPU in KiB (default: Linux's, 1408 once an event is enabled)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every client that connects and leaves")
	return cmd
}
