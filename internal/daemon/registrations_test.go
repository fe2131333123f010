package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

// failedRegistrations is how many registrations the child tries on each
// connection: the audit's 5 000, past the default per-connection limit.
const failedRegistrations = 5000

// TestFailedRegistrationsCounted: a registration whose enable word is
// outside the arena fails ENOMEM, and its event stays in the connection's
// user_events_data as in Linux (user_events_ioctl_reg adds the reference
// before user_event_enabler_create fails) — so it counts in the
// connection's and the uid's limits. The audit's reproduction: 5 000 such
// registrations per connection went past --max-registrations, uncounted,
// until user_events_max was reached and root's registration got EMFILE.
// With the default limits one uid holds at most half of user_events_max,
// root registers after it, and everything it held goes when it leaves.
func TestFailedRegistrationsCounted(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "failreg" {
		failedRegistrationsChild(t)
		return
	}
	dir, exe := childDir(t)
	s := serveIn(t, Config{}, dir)
	os.Chmod(s.sock, 0o666)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := childCmd(ctx, exe, "TestFailedRegistrationsCounted", "failreg", s.sock, nobodyUID)
	stdin, stdout := startChild(t, cmd)
	sc := bufio.NewScanner(stdout)
	var report []string
	for sc.Scan() && sc.Text() != "ready" {
		if strings.HasPrefix(sc.Text(), "conn ") {
			report = append(report, sc.Text())
		}
	}
	t.Logf("%q", report)
	if len(report) != 4 {
		t.Fatalf("the child reported %q", report)
	}
	held := 0
	for i, line := range report {
		var conn, n int
		if _, err := fmt.Sscanf(line, "conn %d: limit after %d", &conn, &n); err != nil {
			t.Fatalf("connection %d: %q: no limit", i, line)
		}
		if n > DefaultRegistrationsPerConn {
			t.Errorf("connection %d: %d failed registrations before the limit, over --max-registrations %d", i, n, DefaultRegistrationsPerConn)
		}
		held += n
	}
	max := s.Subsystem().MaxEvents()
	if n := len(s.Subsystem().Events()); n > max/2 || n != held {
		t.Errorf("%d events exist, %d of them the child's: want them all the child's, at most half of user_events_max %d", n, held, max)
	}
	if got := s.Stats().ByUID[nobodyUID].Refs; got != held {
		t.Errorf("the child's uid is counted %d event references, holds %d", got, held)
	}
	// Root registers still.
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	root := a.dial(t, s.sock)
	if _, _, err := root.Register(reg(a.addr(0), 0), "root_ev u32 a", false); err != nil {
		t.Errorf("root's registration after the child's: %v", err)
	}
	root.Close()
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
	testutil.Wait(t, "the child's events to go", func() bool {
		_, counted := s.Stats().ByUID[nobodyUID]
		return !counted && len(s.Subsystem().Events()) == 0
	})
}

// failedRegistrationsChild registers events with an enable word outside
// its arena on 4 connections, up to failedRegistrations each, reports how
// many failed before the limit refused, and holds them until its stdin
// closes.
func failedRegistrationsChild(t *testing.T) {
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	outside := reg(a.addr(0)+8192, 0)
	for i := range 4 {
		c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; n < failedRegistrations; n++ {
			_, _, err := c.Register(outside, fmt.Sprintf("fail_%d_%d u32 a", i, n), false)
			if err == nil {
				t.Fatalf("registration %d on connection %d succeeded", n, i)
			}
			if strings.Contains(err.Error(), "--max-registrations") {
				break
			}
			if n == 0 && i == 0 {
				fmt.Fprintf(os.Stderr, "%v\n", err)
			}
		}
		if n == failedRegistrations {
			fmt.Printf("conn %d: no limit after %d\n", i, n)
		} else {
			fmt.Printf("conn %d: limit after %d\n", i, n)
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
}
