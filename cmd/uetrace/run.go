package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/runguard"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// runShimArg, as the first argument, makes uetrace the helper uetrace run
// starts in the command's new namespaces (runShim).
const runShimArg = "__uetrace-run-shim"

// tracingDirs are where programs look for tracefs: the FUSE tree is mounted
// on the first and bound over the second where it exists.
var tracingDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

func newRunCmd(g *globals) *cobra.Command {
	var (
		verbose   bool
		private   bool
		noPreload bool
		abiFlag   string
		fuseDev   string
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [--] COMMAND [ARG...]",
		Short: "Run a command where /sys/kernel/tracing is uetrace's: user_events for any program",
		Long: `run runs COMMAND in a mount namespace of its own in which /sys/kernel/tracing
(and /sys/kernel/debug/tracing) is a uetrace subsystem served through FUSE:
user_events_data, user_events_status, dynamic_events, events/, trace,
trace_pipe... with the kernel's modes, text and errno. Any program — C, Rust,
Python, a shell script, the kernel's own selftests — then uses user_events
unmodified on a kernel that has none: it opens user_events_data, registers
with DIAG_IOCSREG, gets its enable bits set in its memory, and writes.

When a uetrace daemon answers (--socket, $UETRACE_SOCKET or the default
socket), the tree is the daemon's: uetrace trace, status and record outside
see the command's events, and it sees everyone else's. Otherwise, or with
--private, a subsystem lives in this process, for the command and its
children alone. Either way $UETRACE_SOCKET points them at it, so uetrace's own
commands and Go programs using the userevents package inside share it. run
exits with the command's status.

run also preloads its interposer into the command (LD_PRELOAD, from a
read-only tmpfs in the command's mount namespace): a dynamically linked
program's writes to user_events_data then go into a shared-memory ring the
daemon drains, answered as the kernel would and with no system call, instead
of a FUSE round trip each; everything else it does is untouched. Static
binaries, setuid programs and programs that make their system calls
themselves are not preloaded into and write through FUSE. --no-preload (or
UETRACE_PRELOAD=off) leaves it out; uetrace preload writes it for programs
started another way. --abi v10 serves, beside today's ABI, the first one of
the user_events series (a 24-byte struct user_reg and a mapped status page),
which no Linux release enabled.

As root it needs /dev/fuse. As an ordinary user it makes a user namespace in
which the command runs as root (uid 0 there, your uid outside), which needs
the kernel to allow unprivileged user namespaces, and /dev/fuse to be usable
by you (mode 0666, as distributions ship it). To set enable bits and read
registrations, this process reads and writes the command's memory
(process_vm_readv/writev), which the kernel allows for your own processes
unless Yama's ptrace_scope is 2 or more.

Linux's perf sees these events: perf_event_open is the kernel's, which
knows nothing of them, so run answers the command's perf_event_open of one
of the tree's event ids itself (a seccomp filter hands it the call): the
tree makes the event and run installs its file in the command, whose read,
ioctls, poll and mmap'd ring are perf's. perf record -e user_events:x,
perf script on its perf.data, perf stat -e user_events:x and the kernel's
perf_test work unmodified. The ring is shared memory through FUSE
passthrough, which needs Linux 6.9 and root (run as root, or a daemon
running as root); without it, and for what uetrace cannot give (call
chains, event groups, kernel and tree events in one perf record), the open
fails with EOPNOTSUPP, said on standard error with the name uetrace record.
A shared mapping of a file makes a round trip to run (about 11 µs).

trace-cmd works inside, unmodified: trace-cmd record -e user_events records
the tree's events, and KernelShark opens the trace.dat (docs/trace-cmd.md).
For it run hands the command's mount and splice calls to itself too: a
mount of tracefs on /sys/kernel/tracing, which libtracefs makes when
/proc/mounts lists none (the tree is fuse.uetrace), is answered as done —
the tree is there —, a splice from a trace_pipe_raw, which reads nothing
through FUSE, is done by run for the command, and
/proc/sys/kernel/ftrace_enabled, which trace-cmd writes, is the command's
own. Mounting tracefs elsewhere or debugfs fails with EPERM, said on
standard error, so that the tree stays. Every other call goes to the kernel
as it was. The tree's event ids are above any the kernel hands out, so even
without the filter (a kernel before 5.5) such an open names no kernel
tracepoint.`,
		Example: `  uetrace run -- sh -c 'echo "u:hello u32 n" >> /sys/kernel/tracing/dynamic_events;
                      cat /sys/kernel/tracing/user_events_status'
  uetrace run -- ./my_c_program       # opens /sys/kernel/tracing/user_events_data
  sudo uetrace run -- ./abi_test      # the kernel's own selftest
  sudo uetrace run -- perf record -e user_events:hello -- ./my_c_program
  sudo uetrace run -- trace-cmd record -e user_events ./my_c_program`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr(cmd, nil, "run needs a COMMAND to run")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			v10 := false
			switch abiFlag {
			case "", "current":
			case "v10":
				if noPreload || preload.Library == nil {
					return usageErr(cmd, nil, "--abi v10 needs the interposer (its status page is mapped by it): not with --no-preload, and on amd64 only")
				}
				v10, private = true, true
			default:
				return usageErr(cmd, nil, "--abi takes current or v10, not "+strconv.Quote(abiFlag))
			}
			return runCommand(cmd, g, args, fuseDev, private, !noPreload, v10, verbose)
		},
	}
	cmd.Flags().BoolVar(&private, "private", false, "a subsystem of the command's own, even when a daemon is running")
	cmd.Flags().BoolVar(&noPreload, "no-preload", false, "do not preload the interposer: every write goes through FUSE")
	cmd.Flags().StringVar(&abiFlag, "abi", "", "v10: serve the first user_events ABI too (2022's v10 series: a 24-byte struct user_reg, a mapped status page), which no Linux release enabled; implies --private")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log the subsystem's clients and the FUSE mount to stderr")
	cmd.Flags().StringVar(&fuseDev, "fuse-device", "/dev/fuse", "the FUSE device to open")
	cmd.Flags().MarkHidden("fuse-device")
	cmd.Flags().SetInterspersed(false)
	return cmd
}

// runCommand serves a subsystem to args[0], started through the shim in new
// namespaces, and returns its exit status: the running daemon's subsystem,
// or one of its own.
func runCommand(cmd *cobra.Command, g *globals, args []string, fuseDev string, private, interpose, v10, verbose bool) error {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	// A command that cannot be found is the shell's 127, said before any
	// namespace is made.
	if _, err := exec.LookPath(args[0]); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "uetrace: run: %v\n", err)
		return &exitStatus{code: 127}
	}
	root := os.Geteuid() == 0
	if !root {
		if err := ptraceAllowed(); err != nil {
			return err
		}
	}

	var (
		sock string
		dc   *client.Conn // the running daemon, which will serve the tree
		sys  *subsys.Subsystem
		srv  *daemon.Server
	)
	if !private {
		sock = g.socket
		if sock == "" {
			sock = wire.DefaultSocket()
		}
		c, err := client.Dial(sock, nil)
		if err == nil {
			dc = c
			defer c.Close()
			log.Debug("the tree is the running daemon's", "socket", sock)
		} else if ie := (*client.IdentityError)(nil); errors.As(err, &ie) {
			log.Warn("not using the daemon there, serving a private tree instead", "err", err)
		}
	}
	if dc == nil {
		dir, err := os.MkdirTemp("", "uetrace-run-")
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		defer os.RemoveAll(dir)
		sock = filepath.Join(dir, "uetrace.sock")
		ln, err := daemon.Listen(sock)
		if err != nil {
			return err
		}
		sys = subsys.New(subsys.Options{NumCPU: traceCPUs()})
		srv = daemon.New(daemon.Config{Subsystem: sys, Logger: log})
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() { srv.Close(); <-served }()
	}

	// The shim hands the mounted /dev/fuse back over this pair, then waits
	// for the word to exec the command.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("run: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "run-shim"), os.NewFile(uintptr(pair[1]), "run-shim")
	defer ours.Close()

	// The interposer's library goes on a tmpfs the shim mounts on this
	// directory in the command's mount namespace: there it is the
	// command's alone, and gone with the namespace; here the directory
	// stays empty.
	preloadDir := ""
	switch {
	case !interpose:
	case preload.Library == nil:
		log.Debug("no interposer for this architecture: the command's writes go through FUSE", "arch", runtime.GOARCH)
	default:
		d, err := os.MkdirTemp("", "uetrace-preload-")
		if err != nil {
			theirs.Close()
			return fmt.Errorf("run: %w", err)
		}
		defer os.Remove(d)
		preloadDir = d
	}
	exe, err := os.Executable()
	if err != nil {
		theirs.Close()
		return fmt.Errorf("run: finding uetrace's own executable to start the shim: %w", err)
	}
	shim := exec.Command(exe, append([]string{runShimArg, fuseDev, preloadDir, "--"}, args...)...)
	shim.Stdin, shim.Stdout, shim.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	shim.Env = append(os.Environ(), "UETRACE_SOCKET="+sock)
	if v10 {
		shim.Env = append(shim.Env, "UETRACE_ABI=v10")
	}
	shim.ExtraFiles = []*os.File{theirs}
	shim.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if !root {
		shim.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		shim.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		shim.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		shim.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	// SIGINT from the terminal reaches the command itself, which decides;
	// run outlives it to pass its status on. SIGTERM and SIGHUP sent to run
	// alone are passed to the command.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := shim.Start(); err != nil {
		theirs.Close()
		if !root && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EACCES)) {
			return &userevents.Error{Op: "run", Input: args[0], Errno: errnoIn(err),
				Reason: "this kernel does not let an ordinary user create a user namespace (kernel.unprivileged_userns_clone, user.max_user_namespaces, or AppArmor's kernel.apparmor_restrict_unprivileged_userns): run uetrace run as root, or allow them"}
		}
		return fmt.Errorf("run: starting %s: %w", args[0], err)
	}
	theirs.Close()
	exited := make(chan struct{})
	go func() { shim.Wait(); close(exited) }()

	shimmed, err := receiveDevice(ours, exited)
	if err != nil {
		shim.Process.Kill()
		<-exited
		return err
	}
	dev, mdev := shimmed.dev, shimmed.mdev
	if shimmed.guard >= 0 {
		g := &runguard.Guard{Tracepoint: treeTracepoint(sys), Log: cmd.ErrOrStderr(), TreeDirs: tracingDirs, SpliceIoctl: fusefs.IoctlSplicePage}
		defer g.Serve(shimmed.guard)()
	} else {
		log.Warn("perf tools inside are not kept from the tree: perf_event_open of its event ids and mounts of tracefs go to the kernel", "reason", shimmed.noGuard)
	}
	if dc != nil {
		// The daemon serves the mount until it goes with the command's
		// mount namespace.
		err = dc.ServeFUSE(dev)
		dev.Close()
		if err != nil {
			shim.Process.Kill()
			<-exited
			return fmt.Errorf("run: the daemon at %s would not serve the tree (--private runs the command with a subsystem of its own): %w", sock, err)
		}
	} else {
		opts := fusefs.Options{Flush: srv.Flush, Dev: mdev, V10: v10,
			Share: func(r fusefs.ShareRequest) (fusefs.Share, error) { return fuseShare(srv, r) }, Rings: srv.Rings()}
		if !root {
			// The subsystem is the command's own: privilege counts in
			// the user namespace made for it, where it is root, as
			// capabilities count in the initial one for the kernel's.
			if ns, err := unix.Open("/proc/"+strconv.Itoa(shim.Process.Pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				defer unix.Close(ns)
				opts.Cred = func(tgid int) subsys.Cred { return subsys.Cred{PerfmonCapable: caps.PerfmonCapableIn(ns, tgid)} }
			}
		}
		tree, err := fusefs.Serve(dev, sys, opts)
		if err != nil {
			shim.Process.Kill()
			<-exited
			return fmt.Errorf("run: serving the FUSE tree: %w", err)
		}
		// Close aborts the connection: anything the command left behind
		// still holding a file of the tree gets ENOTCONN, never a hang.
		defer tree.Close()
	}
	if _, err := ours.Write([]byte("go")); err != nil {
		shim.Process.Kill()
	}
	for {
		select {
		case s := <-sigs:
			if s != os.Interrupt {
				shim.Process.Signal(s)
			}
			continue
		case <-exited:
		}
		break
	}
	return workloadStatus(shim.ProcessState, 0)
}

// shimAnswer is what the shim hands run: the mounted /dev/fuse, the mount's
// st_dev (0 if the shim could not tell), and the listener of the command's
// guard (package runguard) or why it has none.
type shimAnswer struct {
	dev     *os.File
	mdev    uint64
	guard   int // -1: none
	noGuard string
}

// receiveDevice reads the shim's answer, or the words of what went wrong.
func receiveDevice(sock *os.File, exited <-chan struct{}) (shimAnswer, error) {
	type answer struct {
		f       *os.File
		dev     uint64
		guard   int    // the guard's listener, or -1
		noGuard string // why there is none
		err     error
	}
	got := make(chan answer, 1)
	go func() {
		buf := make([]byte, 4096)
		oob := make([]byte, unix.CmsgSpace(2*4))
		n, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			got <- answer{err: fmt.Errorf("run: reading the shim's answer: %w", err)}
			return
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil && (len(fds) == 1 || len(fds) == 2) {
				// "fd DEV [why there is no guard]": the mount's
				// st_dev, in the shim's table; the guard's listener
				// comes after the device.
				a := answer{f: os.NewFile(uintptr(fds[0]), "/dev/fuse"), guard: -1}
				if d, ok := strings.CutPrefix(string(buf[:n]), "fd "); ok {
					d, a.noGuard, _ = strings.Cut(d, " ")
					a.dev, _ = strconv.ParseUint(d, 10, 64)
				}
				if len(fds) == 2 {
					a.guard = fds[1]
				}
				got <- a
				return
			}
		}
		if n == 0 {
			got <- answer{err: errors.New("run: the shim ended without mounting the FUSE tree")}
			return
		}
		got <- answer{err: errors.New(string(buf[:n]))}
	}()
	select {
	case a := <-got:
		if a.err != nil {
			return shimAnswer{}, a.err
		}
		return shimAnswer{a.f, a.dev, a.guard, a.noGuard}, nil
	case <-exited:
		// The shim died before answering (its stderr says why); its end of
		// the pair is closed, so the reader above returns too.
		a := <-got
		if a.f != nil {
			a.f.Close()
		}
		if a.guard >= 0 && a.f != nil {
			unix.Close(a.guard)
		}
		if a.err != nil {
			return shimAnswer{}, a.err
		}
		return shimAnswer{}, errors.New("run: the shim ended without mounting the FUSE tree")
	}
}

// treeTracepoint returns the guard's Tracepoint: whether a tracepoint id is
// one of the tree's, which are subsys's — subsys.DefaultFirstID to
// DefaultLastID, where no kernel hands out its own (subsys's package doc)
// — and its name when the subsystem is this process's (sys; nil when a
// daemon serves the tree).
func treeTracepoint(sys *subsys.Subsystem) func(pid int, id uint64) (string, bool) {
	return func(_ int, id uint64) (string, bool) {
		if id < subsys.DefaultFirstID || id > subsys.DefaultLastID {
			return "", false
		}
		if sys != nil {
			for _, e := range sys.Events() {
				if uint64(e.ID()) == id {
					return e.System() + ":" + e.Tracepoint(), true
				}
			}
		}
		return "", true
	}
}

// runShim is uetrace in the command's new mount namespace (and user
// namespace, for an ordinary user): it mounts a fresh FUSE connection on
// /sys/kernel/tracing, hands the device to uetrace run on descriptor 3,
// puts the interposer where the command's loader preloads it, waits for
// run to serve, and becomes the command. args are the device's path, the
// directory for the interposer ("" for none), "--", the command and its
// arguments.
func runShim(args []string) {
	sock := os.NewFile(3, "run-shim")
	fail := func(format string, a ...any) {
		sock.Write([]byte(fmt.Sprintf(format, a...)))
		os.Exit(127)
	}
	if len(args) < 4 || args[2] != "--" {
		fail("run: shim called with %q", args)
	}
	devPath, preloadDir, argv := args[0], args[1], args[3:]
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fail("run: %v", err)
	}
	// A new mount namespace starts with the parent's propagation: the
	// mounts below would appear on the whole machine.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("run: making the new mount namespace private: %v", err)
	}
	fd, err := mountFUSE(devPath, tracingDirs[0])
	if err != nil {
		fail("run: %v", err)
	}
	for _, d := range tracingDirs[1:] {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			if err := unix.Mount(tracingDirs[0], d, "", unix.MS_BIND, ""); err != nil {
				fail("run: binding the tree over %s: %v", d, err)
			}
		}
	}
	if err := privateFtraceEnabled(); err != nil {
		fmt.Fprintf(os.Stderr, "uetrace: run: %v; trace-cmd record may fail to enable ftrace there\n", err)
	}
	// The mount's st_dev goes with the descriptor: run's mount table does
	// not have this namespace's mounts, and fusectl names the connection
	// by it (to abort it). The interposer recognises the tree by it.
	mdev, _ := fusefs.MountDev(tracingDirs[0])
	env := os.Environ()
	if preloadDir != "" {
		lib, err := installPreload(preloadDir)
		if err != nil {
			fail("run: %v", err)
		}
		env = preloadEnv(env, lib, mdev)
	}
	// The guard's filter is this thread's, and the command's once this
	// thread execs it; its listener goes to run with the device, or the
	// reason there is none.
	runtime.LockOSThread()
	fds, msg := []int{fd}, "fd "+strconv.FormatUint(mdev, 10)
	guard, err := runguard.Install()
	if err == nil {
		fds = append(fds, guard)
	} else {
		msg += " " + err.Error()
	}
	if err := unix.Sendmsg(3, []byte(msg), unix.UnixRights(fds...), nil, 0); err != nil {
		fail("run: handing the FUSE device over: %v", err)
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	// Nothing may touch the tree before it is served; EOF means run gave up.
	buf := make([]byte, 8)
	if n, _ := sock.Read(buf); !bytes.Equal(buf[:n], []byte("go")) {
		os.Exit(127)
	}
	sock.Close()
	err = syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "uetrace: run: exec %s: %v\n", argv[0], err)
	os.Exit(127)
}

// installPreload mounts a small tmpfs on dir, in the shim's mount namespace,
// writes the interposer there, and makes the mount read-only: a file the
// command and its children load, which nobody outside the namespace sees
// and nothing inside can change, on a file system without noexec whatever
// /tmp's options are. It returns the library's path.
func installPreload(dir string) (string, error) {
	if err := unix.Mount("uetrace-preload", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=0755"); err != nil {
		return "", fmt.Errorf("mounting a tmpfs for the interposer on %s: %w", dir, err)
	}
	lib := filepath.Join(dir, preload.FileName)
	if err := os.WriteFile(lib, preload.Library, 0o644); err != nil {
		return "", fmt.Errorf("writing the interposer: %w", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return "", fmt.Errorf("making the interposer's tmpfs read-only: %w", err)
	}
	return lib, nil
}

// preloadEnv is env with lib preloaded — after whatever the user preloads
// already — and the tree's st_dev (UETRACE_TREE, when known), by which the
// interposer recognises the tree's user_events_data among FUSE files.
func preloadEnv(env []string, lib string, treeDev uint64) []string {
	out := make([]string, 0, len(env)+2)
	preloadVar := "LD_PRELOAD=" + lib
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "LD_PRELOAD="):
			if old := strings.TrimPrefix(kv, "LD_PRELOAD="); strings.TrimSpace(old) != "" {
				preloadVar = kv + " " + lib
			}
			continue
		case strings.HasPrefix(kv, "UETRACE_TREE="):
			continue
		}
		out = append(out, kv)
	}
	out = append(out, preloadVar)
	if treeDev != 0 {
		out = append(out, "UETRACE_TREE="+strconv.FormatUint(treeDev, 10))
	}
	return out
}

// mountFUSE opens the FUSE device at devPath and mounts a fresh connection of
// it on dir as the tree's file system type, fuse.uetrace; it returns the
// device, which whoever serves the tree must read. The errors say what is
// missing and what to do.
func mountFUSE(devPath, dir string) (int, error) {
	fd, err := unix.Open(devPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return -1, fmt.Errorf("%s: %w: this machine has no FUSE device; load the module (modprobe fuse) or, in a container, pass /dev/fuse in", devPath, err)
		case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
			return -1, fmt.Errorf("%s: %w: its mode keeps you out; FUSE for ordinary users needs it 0666 (as Debian's fuse3 package sets it), or run as root", devPath, err)
		}
		return -1, fmt.Errorf("opening %s: %w", devPath, err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d,default_permissions", fd, os.Getuid(), os.Getgid())
	if os.Getuid() == 0 && isInitUserNS() {
		// Programs that drop to another uid still reach the tree (the
		// files' own modes then decide); only root may say so.
		opts += ",allow_other"
	}
	if err := unix.Mount("uetrace", dir, "fuse.uetrace", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENODEV) {
			return -1, fmt.Errorf("mounting FUSE on %s: %w: the kernel has no FUSE file system (modprobe fuse)", dir, err)
		}
		return -1, fmt.Errorf("mounting FUSE on %s: %w", dir, err)
	}
	return fd, nil
}

// isInitUserNS reports whether this process is in the machine's first user
// namespace, whose uid_map maps everything.
func isInitUserNS() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	return err == nil && strings.Join(strings.Fields(string(b)), " ") == "0 0 4294967295"
}

// ptraceAllowed says what is wrong when an ordinary user may not read its
// own children's memory: Yama's ptrace_scope 2 (admin only) or 3 (none).
func ptraceAllowed() error {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return nil // no Yama
	}
	return ptraceScope(strings.TrimSpace(string(b)))
}

// ptraceScope judges a value of kernel.yama.ptrace_scope for uetrace run: 0
// lets a process ptrace anything of its user, 1 its descendants — the
// command is run's — and the rest needs root.
func ptraceScope(scope string) error {
	switch scope {
	case "0", "1":
		return nil
	}
	return &userevents.Error{Op: "run", Errno: unix.EPERM,
		Reason: "kernel.yama.ptrace_scope is " + scope + ": uetrace run must read and write the command's memory (registrations, enable bits), which only root may do then; run it as root"}
}

// errnoIn is the errno err wraps, or EIO.
func errnoIn(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}
