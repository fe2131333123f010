package userevents

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
	"github.com/uetrace/uetrace/internal/subsys"
)

// Tracefs is the file tree user_events shows — user_events_status,
// dynamic_events, events/<system>/<event>/{enable,filter,format,id},
// events/<system>/filter, error_log, trace, trace_pipe, tracing_on — on the
// kernel's tracefs or the daemon's, read and written the same way on both.
// A filter file answers only a read at offset 0, on both: read it with one
// large read, not io.ReadAll's first 512 bytes. Paths are relative to the tracefs root
// and '/'-separated.
type Tracefs struct {
	backend Backend
	root    string       // Kernel
	sock    string       // Daemon
	dc      *client.Conn // Daemon: for everything but open files
	fs      *subsys.FS   // InProcess
	cred    subsys.Cred
}

// OpenTracefs opens the tracefs tree of the backend opts select. Auto
// takes the kernel's when it has user_events and can be read, else the
// daemon's.
func OpenTracefs(opts Options) (*Tracefs, error) {
	switch opts.Backend {
	case Kernel:
		return kernelTracefs(opts.Tracefs)
	case Daemon:
		return daemonTracefs(opts.Socket)
	case InProcess:
		s := opts.Subsystem
		if s == nil {
			s = InProcessSubsystem()
		}
		return &Tracefs{backend: InProcess, fs: s.FS(), cred: selfCred()}, nil
	case Auto:
		t, kerr := kernelTracefs(opts.Tracefs)
		if kerr == nil {
			return t, nil
		}
		t, derr := daemonTracefs(opts.Socket)
		if derr == nil {
			return t, nil
		}
		return nil, noBackend(kerr, derr)
	}
	return nil, fmt.Errorf("open tracefs: unknown backend %v: %w", opts.Backend, unix.EINVAL)
}

func kernelTracefs(root string) (*Tracefs, error) {
	root, err := kernelFile(root, "user_events_status", func(path string) error { return unix.Access(path, unix.R_OK) })
	if err != nil {
		return nil, err
	}
	return &Tracefs{backend: Kernel, root: root}, nil
}

func daemonTracefs(sock string) (*Tracefs, error) {
	c, err := client.Dial(sock, nil)
	if err != nil {
		return nil, dialErr(sock, err)
	}
	return &Tracefs{backend: Daemon, sock: c.Path(), dc: c}, nil
}

// Backend is the backend the tree belongs to.
func (t *Tracefs) Backend() Backend { return t.backend }

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
		return "", &Error{Op: "open", Path: name, Errno: unix.ENOENT, Reason: "the path leaves the tracefs tree"}
	}
	return c, nil
}

// TracefsFile is an open tracefs file. On trace_pipe, Read waits for a
// record; Close ends the wait.
type TracefsFile interface {
	io.ReadWriteCloser
}

// Open opens a file with open(2) flags: os.O_RDONLY, os.O_WRONLY or
// os.O_RDWR with os.O_TRUNC, os.O_APPEND, unix.O_NONBLOCK. On the daemon
// each open file has a connection of its own, as each has an fd on the
// kernel, so that closing it ends a wait without disturbing anything else.
func (t *Tracefs) Open(name string, flag int) (TracefsFile, error) {
	name, err := clean(name)
	if err != nil {
		return nil, err
	}
	var f io.ReadWriteCloser
	switch t.backend {
	case Kernel:
		f, err = os.OpenFile(filepath.Join(t.root, filepath.FromSlash(name)), flag, 0)
	case Daemon:
		var c *client.Conn
		if c, err = client.Dial(t.sock, nil); err == nil {
			var df *client.File
			if df, err = c.Open(name, flag); err != nil {
				c.Close()
			} else {
				f = daemonFile{df, c}
			}
		}
	case InProcess:
		f, err = t.fs.Open(name, flag, t.cred)
	}
	if err != nil {
		return nil, wrapErr("open", name, "", err)
	}
	return &tracefsFile{f, name}, nil
}

// tracefsFile is an open file of any backend, whose errors it words as
// *Error values naming the file.
type tracefsFile struct {
	rwc  io.ReadWriteCloser
	name string
}

func (f *tracefsFile) Read(p []byte) (int, error) {
	n, err := f.rwc.Read(p)
	if err != nil && err != io.EOF {
		err = wrapErr("read", f.name, "", err)
	}
	return n, err
}

func (f *tracefsFile) Write(p []byte) (int, error) {
	n, err := f.rwc.Write(p)
	if err != nil {
		err = wrapErr("write", f.name, string(p), err)
	}
	return n, err
}

func (f *tracefsFile) Close() error { return f.rwc.Close() }

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
	switch t.backend {
	case Kernel:
		b, err := os.ReadFile(filepath.Join(t.root, filepath.FromSlash(name)))
		if err != nil {
			return nil, wrapErr("read", name, "", err)
		}
		return b, nil
	case InProcess:
		b, err := t.fs.ReadFile(name, t.cred)
		if err != nil {
			return nil, wrapErr("read", name, "", err)
		}
		return b, nil
	}
	f, err := t.dc.Open(name, os.O_RDONLY)
	if err != nil {
		return nil, wrapErr("open", name, "", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, wrapErr("read", name, "", err)
	}
	return b, nil
}

// WriteFile writes data to a file in one write, as the shell's '>>' (flag
// os.O_APPEND) or '>' (os.O_TRUNC) does. On dynamic_events O_TRUNC first
// deletes every event; on trace it clears the buffer.
func (t *Tracefs) WriteFile(name string, data []byte, flag int) error {
	f, err := t.Open(name, os.O_WRONLY|flag)
	if err != nil {
		var e *Error
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
		return wrapErr("close", name, "", cerr)
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
	case Kernel:
		ents, err := os.ReadDir(filepath.Join(t.root, filepath.FromSlash(name)))
		if err != nil {
			return nil, wrapErr("readdir", name, "", err)
		}
		for _, e := range ents {
			out = append(out, DirEntry{e.Name(), e.IsDir()})
		}
	case Daemon:
		ents, err := t.dc.ReadDir(name)
		if err != nil {
			return nil, wrapErr("readdir", name, "", err)
		}
		for _, e := range ents {
			out = append(out, DirEntry{e.Name, e.Mode.IsDir()})
		}
	case InProcess:
		ents, err := t.fs.ReadDir(name)
		if err != nil {
			return nil, wrapErr("readdir", name, "", err)
		}
		for _, e := range ents {
			out = append(out, DirEntry{e.Name, e.Mode.IsDir()})
		}
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
