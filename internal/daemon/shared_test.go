package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// TestSharedMemoryPerUID: the arenas and rings one user's connections make
// the daemon map are bounded together by Limits.SharedKBPerUID (ENOMEM
// beyond, naming --shared-kb); an arena a process shares again on a second
// connection counts once; another user is served on, root beyond the limit;
// and once the user's client is killed its count is back to 0. (Before it,
// 1024 connections of one user could make the daemon map 128 GiB.)
func TestSharedMemoryPerUID(t *testing.T) {
	switch os.Getenv("UETRACE_TEST_CHILD") {
	case "shared":
		sharedChild(t)
		return
	case "sharedother":
		sharedOtherChild(t)
		return
	}
	dir, exe := childDir(t)
	// One ring a set: each set a header page and a ring (its own header
	// page and data).
	s := serveIn(t, Config{Limits: Limits{SharedKBPerUID: 3 << 10}, Rings: 1}, dir)
	os.Chmod(s.sock, 0o666)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hog := childCmd(ctx, exe, "TestSharedMemoryPerUID", "shared", s.sock, nobodyUID)
	_, stdout := startChild(t, hog)
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() == "holding" {
			break
		}
	}
	wantLines(t, out.String(), "arena 1: ok", "ring 1: ok", "arena 1 again: ok", "ring 2: ENOMEM", "arena 2: ENOMEM", "small ring: ok")
	if !strings.Contains(out.String(), "--shared-kb") {
		t.Errorf("the refusal does not name --shared-kb:\n%s", out.String())
	}
	// A 1 MiB arena, a set of a 1 MiB ring and its two pages, a set of a
	// 512 KiB ring and its two pages.
	const held = 1024 + 1032 + 520
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^uid %d .* shared_kb %d fuse_files 0( |$)`, nobodyUID, held)).MatchString(out.String()) {
		t.Errorf("the user's own Stats line does not show %d KiB shared:\n%s", held, out.String())
	}
	if st := s.Stats(); st.ByUID[nobodyUID].SharedKB != held || st.SharedKB != held || st.OverLimit != 2 {
		t.Errorf("stats while held: %+v", st)
	}

	// Another user's arena and ring, and root's beyond the limit, are
	// served.
	wantLines(t, runChild(t, exe, "TestSharedMemoryPerUID", "sharedother", s.sock, otherUID), "other: ok")
	for i := range 4 {
		c := newArena(t, 1<<20, unix.F_SEAL_SHRINK).dial(t, s.sock)
		if err := shareSet(t, c, 1<<20); err != nil {
			t.Fatalf("root's ring %d: %v", i, err)
		}
	}
	healthy(t, s)

	// Killed, the hog's connections hang up: everything it had the daemon
	// map is given back.
	hog.Process.Kill()
	hog.Wait()
	deadline := time.Now().Add(waitLimit)
	for {
		st := s.Stats()
		if _, ok := st.ByUID[nobodyUID]; !ok && st.SharedKB == st.ByUID[0].SharedKB {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the hog was killed: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sharedChild shares arenas and rings up to its user's limit (3 MiB),
// reports, and holds them until it is killed.
func sharedChild(t *testing.T) {
	sock := os.Getenv("UETRACE_TEST_SOCK")
	a := newArena(t, 1<<20, unix.F_SEAL_SHRINK)
	arena := &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 1 << 20}
	c1, err := client.Dial(sock, arena)
	fmt.Printf("arena 1: %s\n", errnoName(err))
	if err != nil {
		return
	}
	fmt.Printf("ring 1: %s\n", errnoName(shareSet(t, c1, 1<<20)))
	c2, err := client.Dial(sock, arena)
	fmt.Printf("arena 1 again: %s\n", errnoName(err))
	if err != nil {
		return
	}
	err = shareSet(t, c2, 1<<20)
	fmt.Printf("ring 2: %s\n", errnoName(err))
	if err != nil {
		fmt.Printf("(%v)\n", err)
	}
	b := newArena(t, 1<<20, unix.F_SEAL_SHRINK)
	_, err = client.Dial(sock, &client.Arena{FD: b.fd, Addr: b.addr(0), Size: 1 << 20})
	fmt.Printf("arena 2: %s\n", errnoName(err))
	if err != nil {
		fmt.Printf("(%v)\n", err)
	}
	fmt.Printf("small ring: %s\n", errnoName(shareSet(t, c2, 512<<10)))
	st, err := c1.Stats()
	fmt.Printf("stats: %s\n%s", errnoName(err), st)
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
}

// sharedOtherChild is another user sharing an arena and a ring.
func sharedOtherChild(t *testing.T) {
	a := newArena(t, 1<<20, unix.F_SEAL_SHRINK)
	c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 1 << 20})
	if err == nil {
		defer c.Close()
		err = shareSet(t, c, 1<<20)
	}
	fmt.Printf("other: %s\n", errnoName(err))
	if err != nil && !errors.Is(err, unix.ENOMEM) {
		fmt.Printf("(%v)\n", err)
	}
}

// TestFUSEChargeSharedWithSocket: a uid's registrations through the FUSE
// tree (Server.FUSECharge, as package fusefs charges them) and over the
// socket count in one account: with 4 of 5 held through FUSE, its socket
// client gets one more and then ENOMEM. Its FUSE files are bounded
// (EMFILE, naming --max-fuse-files); root and perfmon-capable callers are
// counted, not held; and an account given back to nothing is forgotten.
func TestFUSEChargeSharedWithSocket(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "fusecharge" {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK)
		c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			_, _, err := c.Register(reg(a.addr(8*i), 0), "fusecharge u32 a", false)
			fmt.Printf("register %d: %s\n", i+1, errnoName(err))
		}
		return
	}
	dir, exe := childDir(t)
	s := serveIn(t, Config{Limits: Limits{RegistrationsPerUID: 5, FilesPerUID: 2}}, dir)
	os.Chmod(s.sock, 0o666)
	user := subsys.Cred{}
	if err := s.FUSECharge(nobodyUID, user, 0, 4, false); err != nil {
		t.Fatal(err)
	}
	if err := s.FUSECharge(nobodyUID, user, 0, 2, false); !errors.Is(err, unix.ENOMEM) || !strings.Contains(err.Error(), "--max-registrations-per-uid") {
		t.Errorf("2 registrations over 4 of 5: %v, want ENOMEM naming --max-registrations-per-uid", err)
	}
	if err := s.FUSECharge(nobodyUID, user, 2, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := s.FUSECharge(nobodyUID, user, 1, 0, false); !errors.Is(err, unix.EMFILE) || !strings.Contains(err.Error(), "--max-fuse-files") {
		t.Errorf("a third file: %v, want EMFILE naming --max-fuse-files", err)
	}
	for _, who := range []struct {
		uid  uint32
		cred subsys.Cred
	}{{0, user}, {otherUID, subsys.Cred{PerfmonCapable: true}}, {uint32(os.Geteuid()), user}} {
		if err := s.FUSECharge(who.uid, who.cred, 10, 10, false); err != nil {
			t.Errorf("uid %d (%+v), who is spared the limits: %v", who.uid, who.cred, err)
		}
		s.FUSECharge(who.uid, who.cred, -10, -10, true)
	}
	out := runChild(t, exe, "TestFUSEChargeSharedWithSocket", "fusecharge", s.sock, nobodyUID)
	wantLines(t, out, "register 1: ok", "register 2: ENOMEM")
	waitConns(t, s, 0)
	if st := s.Stats(); st.ByUID[nobodyUID] != (UIDStats{Regs: 4, FUSEFiles: 2}) || len(st.ByUID) != 1 || st.OverLimit != 3 {
		t.Errorf("stats after the socket client left: %+v", st)
	}
	s.FUSECharge(nobodyUID, user, -2, -4, true)
	if st := s.Stats(); len(st.ByUID) != 0 {
		t.Errorf("an empty account is kept: %+v", st)
	}
}

// shareSet shares on c a new ring set of c.Rings() rings of size bytes
// each, closed at the test's end.
func shareSet(t testing.TB, c *client.Conn, size int) error {
	t.Helper()
	sp, err := shmring.CreateSet(c.Rings(), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return c.ShareRingSet(sp)
}
