package main

import (
	"bufio"
	"context"
	enc "encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/testutil"
)

// FUSE gives a caller's pid in the pid namespace of whoever mounted the
// tree. These tests run uetrace run inside pid namespaces of its own
// (unshare, as the reproduction does) against a root daemon outside,
// with the programs of testdata/pidns.c.

// victimAddr is VICTIM_ADDR of testdata/pidns.c: where the victim holds its
// struct user_reg.
const victimAddr = 0x5a5a00000000

// pidnsEnv is a root daemon anyone may reach, tracer uid 65534, and the
// test programs, in a directory every user can read.
type pidnsEnv struct {
	dir, sock, uetrace, prog, fuseDev string
}

func newPidnsEnv(t *testing.T) *pidnsEnv {
	t.Helper()
	needFUSE(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	dir := testutil.SharedDir(t)
	e := &pidnsEnv{dir: dir, sock: filepath.Join(dir, "uetrace.sock"), uetrace: copyBinary(t, dir), prog: filepath.Join(dir, "pidns")}
	testutil.BuildC(t, e.prog, filepath.Join("testdata", "pidns.c"), "-Wall", "-O2")
	// A FUSE device an ordinary user may open (this machine's is root's
	// alone; distributions make it 0666).
	e.fuseDev = filepath.Join(dir, "fuse")
	if err := unix.Mknod(e.fuseDev, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229))); err != nil {
		t.Skipf("mknod of a FUSE device: %v", err)
	}
	if err := os.Chmod(e.fuseDev, 0o666); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(e.uetrace, "serve", "--socket", e.sock, "--mode", "0666", "--tracers", "65534")
	log := &testutil.Buffer{}
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
		if t.Failed() {
			t.Logf("daemon's log:\n%s", log)
		}
	})
	testutil.Wait(t, "the daemon to answer", func() bool {
		_, err := os.Stat(e.sock)
		return err == nil
	})
	return e
}

// start starts cmd with its stdout read line by line; closing the returned
// writer is the program's end.
func startLines(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return in, bufio.NewScanner(out)
}

// The reproduction: a tracer runs `uetrace run` in a pid namespace
// of its own, gives the command there the pid another user's process V has
// in the daemon's namespace, and calls DIAG_IOCSREG with the address of a
// struct user_reg V holds. The daemon took the pid as its own namespace's:
// it read V's registration and wrote write_index into V. Now the caller is
// found in its own namespace, and the call fails on its own memory (its
// struct there is zeroed: size 0, EINVAL, where V's would have registered)
// and V's write_index is still the sentinel.
func TestRunPidnsCannotReachAnotherUser(t *testing.T) {
	e := newPidnsEnv(t)
	for _, tc := range []struct {
		name   string
		tracer *syscall.Credential // nil: root
		victim *syscall.Credential
		ns     []string
	}{
		// root in a pid namespace: the daemon still finds the caller.
		{"root", nil, &syscall.Credential{Uid: 65534, Gid: 65534}, []string{"--pid", "--fork", "--mount-proc"}},
		// The issue's: an ordinary tracer, root of a user namespace of
		// its own, against a process of another user.
		{"userns", &syscall.Credential{Uid: 65534, Gid: 65534}, &syscall.Credential{Uid: 1, Gid: 1},
			[]string{"--user", "--map-root-user", "--pid", "--fork", "--mount", "--mount-proc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim := exec.Command(e.prog, "victim")
			victim.SysProcAttr = &syscall.SysProcAttr{Credential: tc.victim}
			vin, vout := startLines(t, victim)
			defer vin.Close()
			if !vout.Scan() {
				t.Fatal("the victim did not start")
			}
			vpid := victim.Process.Pid
			if vpid < 100 {
				t.Skipf("the victim's pid %d is one the namespace's own processes may hold", vpid)
			}
			// The command retries until the attacker gets the victim's pid
			// (uetrace run's threads share the namespace's pids).
			script := fmt.Sprintf(`for i in $(seq 50); do
	echo %d > /proc/sys/kernel/ns_last_pid || exit 8
	%s attack %d /sys/kernel/tracing/user_events_data; r=$?
	[ $r -ne 3 ] && exit $r
done
echo "never got pid %d"; exit 9`, vpid-1, e.prog, vpid, vpid)
			args := append(append([]string{}, tc.ns...), e.uetrace, "--socket", e.sock, "run", "--fuse-device", e.fuseDev, "--", "sh", "-c", script)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "unshare", args...)
			cmd.Env = append(os.Environ(), "UETRACE_SOCKET=")
			cmd.Dir = e.dir
			if tc.tracer != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tc.tracer}
			}
			out, err := cmd.CombinedOutput()
			if tc.tracer != nil && err != nil && strings.Contains(string(out), "unshare failed") {
				t.Skipf("this kernel keeps ordinary users out of user namespaces: %s", out)
			}
			if err != nil {
				t.Fatalf("the attack did not run: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "ioctl=-1 errno=EINVAL") {
				t.Errorf("DIAG_IOCSREG with the victim's address from pid %d of the tracer's namespace succeeded: %s", vpid, out)
			}
			wi := readWord(t, vpid, victimAddr+24)
			if wi != 0xdeadbeef {
				t.Errorf("the victim's write_index was written: %#x, want the sentinel 0xdeadbeef", wi)
			}
		})
	}
}

// readWord reads a u32 of process pid's memory.
func readWord(t *testing.T, pid int, addr uint64) uint32 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], int64(addr)); err != nil {
		t.Fatal(err)
	}
	return enc.NativeEndian.Uint32(b[:])
}

// uetrace run inside a pid namespace — and a command inside a further one
// — registers, gets its enable bit, and writes; the daemon's trace shows
// the record with the writer's pid as the daemon's namespace numbers it.
// Before, the daemon took the namespace's pid as its own: ESRCH, or another
// process.
func TestRunInPidns(t *testing.T) {
	e := newPidnsEnv(t)
	for _, tc := range []struct {
		name  string
		outer []string // what uetrace run is started in
		inner []string // what the command is started in, inside
	}{
		{"run in a pid namespace", []string{"--pid", "--fork", "--mount-proc"}, nil},
		{"without its /proc", []string{"--pid", "--fork"}, nil},
		{"nested", []string{"--pid", "--fork", "--mount-proc"}, []string{"unshare", "--pid", "--fork", "--mount-proc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, tc.outer...), e.uetrace, "--socket", e.sock, "run", "--")
			args = append(append(args, tc.inner...), e.prog, "produce", "/sys/kernel/tracing/user_events_data")
			cmd := exec.Command("unshare", args...)
			cmd.Env = append(os.Environ(), "UETRACE_SOCKET=")
			in, out := startLines(t, cmd)
			if !out.Scan() {
				t.Fatal("the producer said nothing")
			}
			line := out.Text()
			nspid, ok := strings.CutPrefix(line, "registered ")
			if !ok {
				t.Fatalf("the producer could not register: %s", line)
			}
			// The producer, as the daemon's namespace sees it: the one
			// whose last NSpid is nspid and whose command is pidns.
			mustCLI(t, e.sock, "enable", "pidns_ev")
			if _, err := io.WriteString(in, "go\n"); err != nil {
				t.Fatal(err)
			}
			if !out.Scan() || out.Text() != "wrote" {
				t.Fatalf("the producer did not write: %q", out.Text())
			}
			trace := mustCLI(t, e.sock, "trace")
			pid := tracePID(trace, "pidns_ev")
			if pid <= 0 {
				t.Fatalf("no pidns_ev record in the trace:\n%s", trace)
			}
			st, err := procfs.ReadStatus(pid)
			if err != nil {
				t.Fatalf("the record's pid %d is no process: %v\n%s", pid, err, trace)
			}
			ids := st.NSpid
			if len(ids) < 2 || strconv.Itoa(ids[len(ids)-1]) != nspid || ids[0] != pid {
				t.Errorf("the record's pid %d has NSpid %v; want the producer's, whose own is %s", pid, ids, nspid)
			}
			if want := "pidns_ev: pid=0x" + decToHex(nspid) + " (" + nspid + ")"; !strings.Contains(trace, want) {
				t.Errorf("the record lacks %s:\n%s", want, trace)
			}
			mustCLI(t, e.sock, "write", "--trunc", "trace", "")
			mustCLI(t, e.sock, "disable", "pidns_ev")
			in.Close()
			cmd.Wait()
		})
	}
}

// tracePID is the pid of the first record of event in trace text: the
// number after the last '-' of the first field ("comm-PID").
func tracePID(trace, event string) int {
	for l := range strings.Lines(trace) {
		if !strings.Contains(l, " "+event+":") {
			continue
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		i := strings.LastIndexByte(f[0], '-')
		if n, err := strconv.Atoi(f[0][i+1:]); err == nil {
			return n
		}
	}
	return 0
}

func decToHex(dec string) string {
	n, _ := strconv.Atoi(dec)
	return strconv.FormatInt(int64(n), 16)
}
