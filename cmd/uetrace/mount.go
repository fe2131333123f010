package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/userevents"
)

func newMountCmd(g *globals) *cobra.Command {
	var fuseDev string
	cmd := &cobra.Command{
		Use:   "mount DIR",
		Short: "Mount the running daemon's tracefs tree on a directory, through FUSE",
		Long: `mount mounts the tracefs tree of the daemon that answers (--socket,
$UETRACE_SOCKET or the default socket) on DIR through the kernel's FUSE, and
returns: the daemon serves it until it is unmounted (umount DIR) or the daemon
stops. Any program can then use user_events by its files: cat
DIR/user_events_status, echo 1 > DIR/events/user_events/NAME/enable, or, bound
over /sys/kernel/tracing in a mount namespace, C programs unmodified.

It needs root (mounting), and the daemon takes the mount only from root or
its own user. The files are tracefs's: root's, 0640 and 0440 (the daemon's
--group gives them a group). uetrace serve --mount DIR does the same when the
daemon starts; uetrace run does it for one command.`,
		Example: `  sudo uetrace mount /run/uetrace/tracing
  sudo cat /run/uetrace/tracing/user_events_status
  sudo umount /run/uetrace/tracing`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(cmd, nil, "mount needs the directory to mount on")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			sock := g.socket
			if sock == "" {
				sock = wire.DefaultSocket()
			}
			c, err := client.Dial(sock, nil)
			if err != nil {
				return fmt.Errorf("mount: no daemon answers at %s (start one with uetrace serve): %w", sock, err)
			}
			defer c.Close()
			if err := mountPoint(dir); err != nil {
				return fmt.Errorf("mount: %w", err)
			}
			fd, err := mountFUSE(fuseDev, dir)
			if err != nil {
				if os.Geteuid() != 0 {
					return &userevents.Error{Op: "mount", Input: dir, Errno: unix.EPERM, Reason: "mounting needs root: " + err.Error()}
				}
				return fmt.Errorf("mount: %w", err)
			}
			dev := os.NewFile(uintptr(fd), "/dev/fuse")
			err = c.ServeFUSE(dev)
			dev.Close()
			if err != nil {
				// Nobody will serve it: take it away rather than leave a
				// mount whose every access fails.
				unix.Unmount(dir, unix.MNT_DETACH)
				return fmt.Errorf("mount: the daemon at %s would not serve the tree: %w", sock, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&fuseDev, "fuse-device", "/dev/fuse", "the FUSE device to open")
	cmd.Flags().MarkHidden("fuse-device")
	return cmd
}

// mountPoint makes dir, and the directories above it, when it does not
// exist yet (0755, as systemd makes a mount unit's Where=): the README's
// /run/uetrace/tracing is not there on a fresh machine. Something there that
// is not a directory is an error that says so.
func mountPoint(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, unix.ENOTDIR)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the mount point: %w", err)
	}
	return nil
}
