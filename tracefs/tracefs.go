// Package tracefs reads and writes the file tree user_events shows —
// user_events_status, dynamic_events, available_events,
// events/<system>/<event>/{enable,filter,format,id}, events/<system>/filter,
// error_log, trace, trace_pipe, tracing_on, buffer_size_kb — on the kernel's
// tracefs or a uetrace daemon's, the same way on both: what a program uses
// to enable events, follow the trace or read the status, as `uetrace
// enable`, `uetrace trace` and `uetrace status` do.
//
//	t, err := tracefs.Open(nil) // the kernel's, else the daemon's
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer t.Close()
//	err = t.WriteFile("events/user_events/myapp_request/enable", []byte("1"), os.O_TRUNC)
//	if err != nil {
//		log.Fatal(err)
//	}
//
// Errors are *userevents.Error values naming the file, with the errno the
// kernel gives: errors.Is(err, unix.EACCES) works on them.
//
// It does not register or write events (package userevents) nor record
// them (`uetrace record`).
package tracefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/kernelfs"
	"github.com/uetrace/uetrace/internal/uerror"
	"github.com/uetrace/uetrace/userevents"
)

// FS is a tracefs tree other than a mounted one or a daemon's: the
// in-process kernel of package usereventstest, or a test double.
type FS interface {
	// Open opens a file with open(2) flags, as Tracefs.Open documents.
	Open(name string, flag int) (io.ReadWriteCloser, error)
	// ReadDir lists a directory.
	ReadDir(name string) ([]DirEntry, error)
}

// Tracefs is a user_events file tree. A filter file answers only a read at
// offset 0, on every backend: read it with one large read, not
// io.ReadAll's first 512 bytes. Paths are relative to the tracefs root and
// '/'-separated.
type Tracefs struct {
	backend userevents.Backend
	root    string       // Kernel
	sock    string       // Daemon
	dc      *client.Conn // Daemon: for everything but open files
	fs      FS           // Other
}

// Open opens the tracefs tree of the backend opts select (nil: Auto, which
// takes the kernel's when it has user_events and can be read, else the
// daemon's). The tree of an Options.OpenData kernel is that kernel's to
// give (usereventstest.Kernel.Tracefs).
func Open(opts *userevents.Options) (*Tracefs, error) {
	if opts == nil {
		opts = &userevents.Options{}
	}
	if opts.OpenData != nil {
		return nil, fmt.Errorf("open tracefs: the options open another kernel's user_events_data, whose tree only that kernel has (usereventstest.Kernel.Tracefs): %w", unix.EINVAL)
	}
	switch opts.Backend {
	case userevents.Kernel:
		return openKernel(opts.Tracefs)
	case userevents.Daemon:
		return openDaemon(opts.Socket)
	case userevents.Auto:
		t, kerr := openKernel(opts.Tracefs)
		if kerr == nil {
			return t, nil
		}
		t, derr := openDaemon(opts.Socket)
		if derr == nil {
			return t, nil
		}
		return nil, uerror.NoBackend(kerr, derr)
	}
	return nil, fmt.Errorf("open tracefs: backend %v has no tree of its own to open: %w", opts.Backend, unix.EINVAL)
}

// New is the tree fs serves, as a Tracefs of backend Other.
func New(fs FS) *Tracefs { return &Tracefs{backend: userevents.Other, fs: fs} }

func openKernel(root string) (*Tracefs, error) {
	root, err := kernelfs.File(root, "user_events_status", func(path string) error { return unix.Access(path, unix.R_OK) })
	if err != nil {
		return nil, err
	}
	return &Tracefs{backend: userevents.Kernel, root: root}, nil
}

func openDaemon(sock string) (*Tracefs, error) {
	c, err := client.Dial(sock, nil)
	if err != nil {
		return nil, uerror.Dial(sock, err)
	}
	return &Tracefs{backend: userevents.Daemon, sock: c.Path(), dc: c}, nil
}

// Backend is the backend the tree belongs to.
func (t *Tracefs) Backend() userevents.Backend { return t.backend }

// Root is the kernel tracefs mount point, or "" for the other backends.
func (t *Tracefs) Root() string { return t.root }

// Close releases the connection to the daemon, if any.
func (t *Tracefs) Close() error {
	if t.dc != nil {
		return t.dc.Close()
	}
	return nil
}

// clean checks a tracefs path: relative, no "..".
func clean(name string) (string, error) {
	c := path.Clean(strings.TrimPrefix(name, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", &userevents.Error{Op: "open", Path: name, Errno: unix.ENOENT, Reason: "the path leaves the tracefs tree"}
	}
	return c, nil
}

// File is an open tracefs file. On trace_pipe, Read waits for a record;
// Close ends the wait.
type File interface {
	io.ReadWriteCloser
}

// Open opens a file with open(2) flags: os.O_RDONLY, os.O_WRONLY or
// os.O_RDWR with os.O_TRUNC, os.O_APPEND, unix.O_NONBLOCK. On the daemon
// each open file has a connection of its own, as each has an fd on the
// kernel, so that closing it ends a wait without disturbing anything else.
func (t *Tracefs) Open(name string, flag int) (File, error) {
	name, err := clean(name)
	if err != nil {
		return nil, err
	}
	var f io.ReadWriteCloser
	switch t.backend {
	case userevents.Kernel:
		f, err = os.OpenFile(filepath.Join(t.root, filepath.FromSlash(name)), flag, 0)
	case userevents.Daemon:
		var c *client.Conn
		if c, err = client.Dial(t.sock, nil); err == nil {
			var df *client.File
			if df, err = c.Open(name, flag); err != nil {
				c.Close()
			} else {
				f = daemonFile{df, c}
			}
		}
	default:
		f, err = t.fs.Open(name, flag)
	}
	if err != nil {
		return nil, uerror.Wrap("open", name, "", err)
	}
	return &file{f, name}, nil
}

// file is an open file of any backend, whose errors it words as
// *userevents.Error values naming the file.
type file struct {
	rwc  io.ReadWriteCloser
	name string
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.rwc.Read(p)
	if err != nil && err != io.EOF {
		err = uerror.Wrap("read", f.name, "", err)
	}
	return n, err
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.rwc.Write(p)
	if err != nil {
		err = uerror.Wrap("write", f.name, string(p), err)
	}
	return n, err
}

func (f *file) Close() error { return f.rwc.Close() }

// daemonFile is a file open through a connection of its own: closing it
// closes the connection, which ends a wait in Read at once.
type daemonFile struct {
	*client.File
	c *client.Conn
}

func (d daemonFile) Close() error { return d.c.Close() }

// ReadFile reads a whole file.
func (t *Tracefs) ReadFile(name string) ([]byte, error) {
	name, err := clean(name)
	if err != nil {
		return nil, err
	}
	var f io.ReadCloser
	switch t.backend {
	case userevents.Kernel:
		b, err := os.ReadFile(filepath.Join(t.root, filepath.FromSlash(name)))
		if err != nil {
			return nil, uerror.Wrap("read", name, "", err)
		}
		return b, nil
	case userevents.Daemon:
		f, err = t.dc.Open(name, os.O_RDONLY)
	default:
		f, err = t.fs.Open(name, os.O_RDONLY)
	}
	if err != nil {
		return nil, uerror.Wrap("open", name, "", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, uerror.Wrap("read", name, "", err)
	}
	return b, nil
}

// WriteFile writes data to a file in one write, as the shell's '>>' (flag
// os.O_APPEND) or '>' (os.O_TRUNC) does. On dynamic_events O_TRUNC first
// deletes every event; on trace it clears the buffer.
func (t *Tracefs) WriteFile(name string, data []byte, flag int) error {
	f, err := t.Open(name, os.O_WRONLY|flag)
	if err != nil {
		var e *userevents.Error
		if errors.As(err, &e) {
			e.Input = string(data)
		}
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return uerror.Wrap("close", name, "", cerr)
	}
	return nil
}

// DirEntry is an entry of a tracefs directory.
type DirEntry struct {
	Name  string
	IsDir bool
}

// ReadDir lists a directory, sorted by name.
func (t *Tracefs) ReadDir(name string) ([]DirEntry, error) {
	name, err := clean(name)
	if err != nil {
		return nil, err
	}
	var out []DirEntry
	switch t.backend {
	case userevents.Kernel:
		var ents []os.DirEntry
		ents, err = os.ReadDir(filepath.Join(t.root, filepath.FromSlash(name)))
		for _, e := range ents {
			out = append(out, DirEntry{e.Name(), e.IsDir()})
		}
	case userevents.Daemon:
		var ents []client.DirEntry
		ents, err = t.dc.ReadDir(name)
		for _, e := range ents {
			out = append(out, DirEntry{e.Name, e.Mode.IsDir()})
		}
	default:
		out, err = t.fs.ReadDir(name)
	}
	if err != nil {
		return nil, uerror.Wrap("readdir", name, "", err)
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
