package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/pidns"
	"github.com/uetrace/uetrace/internal/sdaemon"
	"github.com/uetrace/uetrace/internal/subsys"
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
		tracers   string
		maxConns  int
		limits    daemon.Limits
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

Run as a service, it takes its listening socket from the service manager
when one is passed (systemd's socket activation: a .socket unit with
ListenSequentialPacket=, whose SocketMode= and SocketGroup= then decide who
may connect) and tells it when it is ready (Type=notify, $NOTIFY_SOCKET).
The units are in the repository's dist/systemd.

--mount DIR also serves the tree through the kernel's FUSE on DIR (as root),
so that any program can use it by its files: mount it on /sys/kernel/tracing
(in a mount namespace of its own, as uetrace run does) and C programs, the
kernel's selftests and shell scripts use user_events unmodified. The files
are tracefs's: root's, 0640 and 0440; --group gives them that group, as
tracefs's gid= mount option does.

Who may do what. Everyone who may connect produces: registers, writes,
unregisters and deletes events (as the kernel allows), and reads the
events' status, formats and ids. Tracing control — opening any tracefs file
for writing (enable, tracing_on, buffer_size_kb, set_event, dynamic_events,
clearing trace), sessions (uetrace record, trace -f's reader), serving the
tree over FUSE (uetrace run) — and reading what others wrote (trace,
trace_pipe, sessions' records) are for tracers: root, callers with
CAP_PERFMON (or CAP_SYS_ADMIN) in the daemon's user namespace, the daemon's
own user, and whom --tracers names (uid or user name, @gid or @group name,
comma-separated; "all" for everyone who may connect). The others get EACCES
(a file, as tracefs's root-only modes give) or EPERM (an operation, as
perf_event_paranoid does).

Limits. What a client may make the daemon hold is bounded, per connection
and per user, with the errno Linux gives for the same exhaustion:
connections per user (--max-conns-per-uid, EMFILE) and in all (--max-conns,
ENFILE: each holds at most 5 of the daemon's descriptors — its socket, its
ring's eventfd, its ring set's memfd and the two a request carries, closed
before the next is read — which --max-conns's default counts against RLIMIT_NOFILE); a Hello within --handshake-timeout; open files and sessions per
connection (--max-handles, EMFILE); registrations per connection and user
(--max-registrations, --max-registrations-per-uid, ENOMEM); sessions per
user (--max-sessions, EMFILE) and their buffers (--session-kb, EPERM, as
perf_event_mlock_kb); buffer_size_kb (--max-buffer-kb, ENOMEM); the
enable-word arenas and producer rings a user's clients share with the daemon
(--shared-kb, ENOMEM, as io_uring's rings over RLIMIT_MEMLOCK); the files
of the FUSE tree a user holds open (--max-fuse-files, EMFILE), whose
registrations count with the user's others. Root,
CAP_PERFMON callers and the daemon's own user are held only to the
per-connection ones. uetrace status
shows the counts. 0 is the default; -1 no limit.`,
		Example: `  uetrace serve &
  sudo uetrace serve --mode 0666 --tracers @tracing,alice   # everyone produces; some trace
  uetrace status
  sudo uetrace serve --group tracing           # members of "tracing" may connect
  sudo uetrace serve --mode 0666               # everyone may connect
  sudo uetrace serve --mount /run/uetrace/tracing`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sock := g.socket
			if sock == "" {
				sock = wire.DefaultSocket()
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
			who, err := parseTracers(tracers)
			if err != nil {
				return err
			}
			// Without --group or --mode, Listen's directory (0755) lets
			// everyone see the socket, whose own 0660 then answers a
			// stranger with its owner and group.
			listen := daemon.Listen
			var shared *daemon.Access
			if group != "" || mode != "" {
				listen = func(p string) (*net.UnixListener, error) { return daemon.ListenAccess(p, access) }
				shared = &access
			}
			// A service manager's socket (a .socket unit), or our own.
			ln, activated, err := activatedListener()
			if err != nil {
				return fmt.Errorf("serve: the socket the service manager passed: %w", err)
			}
			if activated {
				sock = ln.Addr().String()
				if group != "" || mode != "" {
					log.Warn("the socket was passed by the service manager: its unit's SocketMode= and SocketGroup= decide who may connect, not --group and --mode")
				}
			} else {
				// A per-user socket's directory must be the user's
				// own: anyone may make /tmp/uetrace-<uid> first.
				if g.socket == "" {
					if err := daemon.PrepareSocketDir(shared); err != nil {
						return fmt.Errorf("serve: %w", err)
					}
				}
				if ln, err = listen(sock); err != nil {
					return err
				}
			}
			// The file of a passed socket is the manager's: it stays
			// for the next activation.
			removeSocket := func() {
				if !activated {
					os.Remove(sock)
				}
			}
			if d := daemon.SocketDirBlocks(sock, access.Mode); d != "" && (group != "" || mode != "") && !activated {
				log.Warn("a directory above the socket keeps out whom --group/--mode let in; give it search permission", "dir", d)
			}
			sys := subsys.New(subsys.Options{MaxEvents: maxEvents, NumCPU: traceCPUs(), BufferKB: bufferKB})
			// The tree through FUSE: on --mount, and on mounts clients
			// hand over (uetrace run, uetrace mount).
			var srv *daemon.Server
			// What callers of the tree hold counts in their uid's
			// limits, with what they hold over the socket.
			treeOpts := fusefs.Options{Flush: func() { srv.Flush() }, GID: uint32(access.GID), SetGID: access.SetGroup,
				Charge: func(uid uint32, cred subsys.Cred, files, regs int, force bool) error {
					return srv.FUSECharge(uid, cred, files, regs, force)
				},
				ChargeRefs: func(uid uint32, cred subsys.Cred, n int, force bool) error {
					return srv.FUSEChargeRefs(uid, cred, n, force)
				},
				Share: func(r fusefs.ShareRequest) (fusefs.Share, error) { return fuseShare(srv, r) }}
			srv = daemon.New(daemon.Config{Subsystem: sys, Logger: log, Tracers: who, Limits: limits, MaxConns: maxConns,
				ServeFUSE: func(dev *os.File, from daemon.FUSEMounter) (daemon.FUSETree, error) {
					o, err := handedOver(treeOpts, from)
					if err != nil {
						return nil, err
					}
					return fusefs.Serve(dev, sys, o)
				}})
			treeOpts.Rings = srv.Rings() // the drainers' count, which the interposer's sets have
			ctx, stop := interruptible(cmd)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			if mount != "" {
				if err := mountPoint(mount); err != nil {
					return fmt.Errorf("serve --mount: %w", err)
				}
				tree, err := fusefs.Mount(mount, sys, treeOpts)
				if err != nil {
					srv.Close()
					<-done
					removeSocket()
					return fmt.Errorf("serve --mount %s: %w", mount, err)
				}
				// Close aborts the connection first: a client still
				// holding a file of the tree gets ENOTCONN, never a hang.
				defer tree.Close()
				log.Info("serving the tracefs tree through FUSE", "dir", mount)
			}
			log.Info("serving user_events", "socket", sock, "pid", os.Getpid(), "socket_activated", activated)
			// Type=notify: the unit is started once clients can be served.
			if _, err := sdaemon.Notify("READY=1\nSTATUS=serving user_events on " + sock); err != nil {
				log.Warn("cannot tell the service manager that the daemon is ready", "err", err)
			}
			select {
			case <-ctx.Done():
				log.Info("stopping", "clients", srv.Conns())
				sdaemon.Notify("STOPPING=1")
				srv.Close()
				<-done
				removeSocket()
				return nil
			case err := <-done:
				srv.Close()
				removeSocket()
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
	cmd.Flags().StringVar(&tracers, "tracers", "", "who else may control tracing and read others' records: uid or user, @gid or @group, comma-separated, or all")
	cmd.Flags().IntVar(&maxConns, "max-conns", 0, "connections served at once, of all users (default 16384, or what RLIMIT_NOFILE holds; ENFILE beyond)")
	cmd.Flags().IntVar(&limits.ConnsPerUID, "max-conns-per-uid", 0, "connections of one user (default 1024; EMFILE beyond)")
	cmd.Flags().DurationVar(&limits.Handshake, "handshake-timeout", 0, "how long a connection may take to say Hello (default 10s)")
	cmd.Flags().IntVar(&limits.Handles, "max-handles", 0, "open tracefs files and sessions per connection (default 1024; EMFILE beyond)")
	cmd.Flags().IntVar(&limits.RegistrationsPerConn, "max-registrations", 0, "registrations per connection: events its user_events_data refers to, failed registrations' included, and enablers, each (default 4096; ENOMEM beyond)")
	cmd.Flags().IntVar(&limits.RegistrationsPerUID, "max-registrations-per-uid", 0, "registrations per user: events its files refer to, and enablers, each (default 8192, or a quarter of --max-events if less; ENOMEM beyond)")
	cmd.Flags().IntVar(&limits.SessionsPerUID, "max-sessions", 0, "sessions per user (default 64; EMFILE beyond)")
	cmd.Flags().IntVar(&limits.SessionKBPerUID, "session-kb", 0, "KiB of session buffers and rings per user (default 262144; EPERM beyond, as perf_event_mlock_kb)")
	cmd.Flags().IntVar(&limits.SharedKBPerUID, "shared-kb", 0, "KiB of enable-word arenas and producer rings a user's clients may share with the daemon (default 1048576; ENOMEM beyond)")
	cmd.Flags().IntVar(&limits.FilesPerUID, "max-fuse-files", 0, "files of the FUSE tree one user may hold open (default 4096; EMFILE beyond)")
	cmd.Flags().IntVar(&limits.BufferKB, "max-buffer-kb", 0, "largest buffer_size_kb a tracer without CAP_PERFMON may set (default 16384; ENOMEM beyond)")
	return cmd
}

// activatedListener is the listening socket a service manager passed
// (systemd's socket activation, sd_listen_fds(3)), if it passed any.
func activatedListener() (*net.UnixListener, bool, error) {
	files, err := sdaemon.Listeners()
	if err != nil || files == nil {
		return nil, false, err
	}
	ln, err := sdaemon.SeqPacketListener(files)
	return ln, err == nil, err
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

// parseTracers reads --tracers: users (uid or name) and @groups (gid or
// name), comma-separated, or all.
func parseTracers(list string) (daemon.Tracers, error) {
	var t daemon.Tracers
	for _, w := range strings.Split(list, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case w == "all":
			t.All = true
		case strings.HasPrefix(w, "@"):
			g, err := user.LookupGroup(w[1:])
			if err != nil {
				g, err = user.LookupGroupId(w[1:])
			}
			gid, perr := strconv.ParseUint(w[1:], 10, 32)
			if err == nil {
				gid, perr = strconv.ParseUint(g.Gid, 10, 32)
			}
			if perr != nil {
				return t, &userevents.Error{Op: "serve --tracers", Input: w, Errno: unix.EINVAL, Reason: "no such group (see /etc/group); name it, or give its number"}
			}
			t.GIDs = append(t.GIDs, uint32(gid))
		default:
			u, err := user.Lookup(w)
			if err != nil {
				u, err = user.LookupId(w)
			}
			uid, perr := strconv.ParseUint(w, 10, 32)
			if err == nil {
				uid, perr = strconv.ParseUint(u.Uid, 10, 32)
			}
			if perr != nil {
				return t, &userevents.Error{Op: "serve --tracers", Input: w, Errno: unix.EINVAL, Reason: "no such user (see /etc/passwd); name it, or give its uid, or @group"}
			}
			t.UIDs = append(t.UIDs, uint32(uid))
		}
	}
	return t, nil
}

// fuseShare gives srv the share a process preloaded with the interposer set
// up on a FUSE tree of its subsystem (fusefs.Options.Share).
func fuseShare(srv *daemon.Server, r fusefs.ShareRequest) (fusefs.Share, error) {
	sh, err := srv.FUSEShare(r.File, r.Writer, r.UID, r.Cred, r.Set, r.Table, r.Wake)
	if err != nil {
		return nil, err
	}
	return sh, nil
}

// handedOver is the options of a tree on a FUSE mount a client handed over:
// its callers' ids are in the pid namespace of the client (who mounted it,
// itself or through uetrace run's shim, which makes no pid namespace), and
// they are reached only where the client could ptrace them — a client that
// mounted in another pid namespace than its own gets its callers found
// wrongly (ESRCH), never another user's process. Root's reach everything.
func handedOver(o fusefs.Options, from daemon.FUSEMounter) (fusefs.Options, error) {
	m, err := pidns.OfPidfd(from.Pidfd)
	if err != nil {
		return o, fmt.Errorf("the pid namespace of the mount (the client's, pid %d): %w", from.PID, err)
	}
	o.PIDs = m
	o.For = &caps.User{UID: from.UID, GID: from.GID, Privileged: from.UID == 0}
	return o, nil
}
