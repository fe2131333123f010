package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/userevents"
)

func newPreloadCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "preload FILE",
		Short: "Write the interposer library, for programs started without uetrace run",
		Long: `preload writes libuetrace-preload.so — the interposer uetrace run preloads into
its command — to FILE, for programs started another way: a service whose
/sys/kernel/tracing is the daemon's tree (uetrace mount, or uetrace serve
--mount, bound there). Preloaded (LD_PRELOAD=FILE), a dynamically linked
program's writes to the tree's user_events_data go into a shared-memory ring
the daemon drains, without a FUSE round trip each; everything else it does
is untouched, and the answers are the same. Static binaries, setuid
programs and programs that make system calls themselves are not preloaded
into and keep writing through FUSE.

The library recognises the tree's user_events_data on any FUSE file system,
by the inode number the tree gives it and a question only the tree answers;
UETRACE_TREE=<st_dev> narrows that to one mount (uetrace run sets it).
UETRACE_PRELOAD=off turns it off in a program, UETRACE_RING_KB sizes its
rings (default 1024).`,
		Example: `  sudo uetrace preload /usr/local/lib/uetrace/libuetrace-preload.so
  # a systemd service, with the daemon's tree mounted on /run/uetrace/tracing:
  #   [Service]
  #   BindPaths=/run/uetrace/tracing:/sys/kernel/tracing
  #   Environment=LD_PRELOAD=/usr/local/lib/uetrace/libuetrace-preload.so`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(cmd, nil, "preload needs the file to write the library to")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if preload.Library == nil {
				return &userevents.Error{Op: "preload", Errno: unix.ENOTSUP,
					Reason: "there is no interposer for " + runtime.GOARCH + " (amd64 only): programs write through FUSE"}
			}
			file := args[0]
			// Its directory made as install -D makes it: the example's
			// /usr/local/lib/uetrace does not exist on a fresh machine.
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return fmt.Errorf("preload: creating the library's directory: %w", err)
			}
			if err := writeFileAtomic(file, preload.Library, 0o644); err != nil {
				return fmt.Errorf("preload: %w", err)
			}
			abs, _ := filepath.Abs(file)
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d bytes, sha256 %x)\npreload it with LD_PRELOAD=%s\n",
				abs, len(preload.Library), sha256.Sum256(preload.Library), abs)
			return nil
		},
	}
	return cmd
}

// writeFileAtomic writes b to file through a temporary file in the same
// directory renamed over it, so that a program starting meanwhile loads
// either the old library or the new one, never half of one.
func writeFileAtomic(file string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
