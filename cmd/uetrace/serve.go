package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"runtime"
	"strconv"

	"github.com/spf13/cobra"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/daemon"
	"github.com/uetrace/uetrace/fusefs"
	"github.com/uetrace/uetrace/subsys"
	"github.com/uetrace/uetrace/userevents"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		maxEvents int
		bufferKB  int
		verbose   bool
		group     string
		mode      string
		mount     string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve user_events to the programs of this machine from a daemon",
		Long: `serve runs the user_events subsystem in this process and serves it on a Unix
socket, for kernels without CONFIG_USER_EVENTS. Programs using the
userevents package register events through it and write them into rings of
memory they share with it, without a system call (a full ring drops the
record, counted and shown as LOST, as the kernel's ring buffer does); the
daemon merges all clients' records in time order. uetrace's other commands
read and write its tracefs tree. A client that exits releases its events as
process exit does in Linux. SIGINT or SIGTERM stops it.

The socket is the owner's and its group's (mode 0660, the daemon's group):
a daemon root starts serves root alone. --group and --mode share it: the
socket, and the directory serve makes for it, get that group, and the mode
(octal) the socket's permission bits; the directory gets search permission
for whom the mode lets connect.

--mount DIR also serves the tree through the kernel's FUSE on DIR (as root),
so that any program can use it by its files: mount it on /sys/kernel/tracing
(in a mount namespace of its own, as uetrace run does) and C programs, the
kernel's selftests and shell scripts use user_events unmodified. The files
are tracefs's: root's, 0640 and 0440; --group gives them that group, as
tracefs's gid= mount option does.`,
		Example: `  uetrace serve &
  uetrace status
  sudo uetrace serve --group tracing           # members of "tracing" may connect
  sudo uetrace serve --mode 0666               # everyone may connect
  sudo uetrace serve --mount /run/uetrace/tracing`,
		Args: noArgs,
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
			access, err := socketAccess(cmd, group, mode)
			if err != nil {
				return err
			}
			// Without --group or --mode, Listen's directory (0755) lets
			// everyone see the socket, whose own 0660 then answers a
			// stranger with its owner and group.
			listen := daemon.Listen
			if group != "" || mode != "" {
				listen = func(p string) (*net.UnixListener, error) { return daemon.ListenAccess(p, access) }
			}
			ln, err := listen(sock)
			if err != nil {
				return err
			}
			if d := daemon.SocketDirBlocks(sock, access.Mode); d != "" && (group != "" || mode != "") {
				log.Warn("a directory above the socket keeps out whom --group/--mode let in; give it search permission", "dir", d)
			}
			sys := subsys.New(subsys.Options{MaxEvents: maxEvents, NumCPU: runtime.NumCPU(), BufferKB: bufferKB})
			// The tree through FUSE: on --mount, and on mounts clients
			// hand over (uetrace run, uetrace mount).
			var srv *daemon.Server
			treeOpts := fusefs.Options{Flush: func() { srv.Flush() }, GID: uint32(access.GID), SetGID: access.SetGroup}
			srv = daemon.New(daemon.Config{Subsystem: sys, Logger: log,
				ServeFUSE: func(dev *os.File) (daemon.FUSETree, error) { return fusefs.Serve(dev, sys, treeOpts) }})
			ctx, stop := interruptible(cmd)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			if mount != "" {
				tree, err := fusefs.Mount(mount, sys, treeOpts)
				if err != nil {
					srv.Close()
					<-done
					os.Remove(sock)
					return fmt.Errorf("serve --mount %s: %w", mount, err)
				}
				// Close aborts the connection first: a client still
				// holding a file of the tree gets ENOTCONN, never a hang.
				defer tree.Close()
				log.Info("serving the tracefs tree through FUSE", "dir", mount)
			}
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
	cmd.Flags().StringVar(&group, "group", "", "the socket's group, by name or number (default: the daemon's)")
	cmd.Flags().StringVar(&mode, "mode", "", "the socket's permission bits in octal, e.g. 0660 or 0666 (default 0660)")
	cmd.Flags().StringVar(&mount, "mount", "", "also serve the tracefs tree through FUSE on this directory (root)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every client that connects and leaves")
	return cmd
}

// socketAccess checks --group and --mode.
func socketAccess(cmd *cobra.Command, group, mode string) (daemon.Access, error) {
	a := daemon.DefaultAccess
	if mode != "" {
		m, err := strconv.ParseUint(mode, 8, 32)
		switch {
		case err != nil:
			return a, &userevents.Error{Op: "serve --mode", Input: mode, Errno: unix.EINVAL, Reason: "the mode is octal permission bits, e.g. 0660 or 0666"}
		case m > 0o777:
			return a, &userevents.Error{Op: "serve --mode", Input: mode, Errno: unix.EINVAL, Reason: "only the permission bits (at most 0777) may be set"}
		case m&0o600 != 0o600:
			return a, &userevents.Error{Op: "serve --mode", Input: mode, Errno: unix.EINVAL, Reason: "the owner must keep read and write (0600)"}
		}
		a.Mode = fs.FileMode(m)
	}
	if group != "" {
		g, err := user.LookupGroup(group)
		if err != nil {
			g, err = user.LookupGroupId(group)
		}
		if err != nil {
			return a, &userevents.Error{Op: "serve --group", Input: group, Errno: unix.EINVAL, Reason: "no such group (see /etc/group)"}
		}
		gid, err := strconv.Atoi(g.Gid)
		if err != nil {
			return a, &userevents.Error{Op: "serve --group", Input: group, Errno: unix.EINVAL, Reason: "the group's id " + g.Gid + " is not a number"}
		}
		a.SetGroup, a.GID = true, gid
	}
	return a, nil
}
