package subsys

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProcessCharge: a Process's Charge is told of every enabler it gains
// and loses — registration, unregister, a fork's copies (forced), release —
// and a refusal is the registration's error, the event staying in the
// file's array as after any failure past user_events_ref_add.
func TestProcessCharge(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	held, forced := 0, 0
	const most = 2
	charge := func(n int, force bool) error {
		if n > 0 && !force && held+n > most {
			return fmt.Errorf("over %d: %w", most, unix.ENOMEM)
		}
		if force && n > 0 {
			forced += n
		}
		held += n
		return nil
	}
	if _, err := e.reg(f, "charge_a u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	// Set afterwards: the enabler already there is charged.
	if !e.p.SetCharge(charge) || e.p.SetCharge(charge) {
		t.Fatal("SetCharge: want it set once")
	}
	if held != 1 {
		t.Fatalf("held %d after SetCharge, want 1", held)
	}
	if _, err := e.reg(f, "charge_b u32 a", 1, 0); err != nil {
		t.Fatal(err)
	}
	_, err := e.reg(f, "charge_c u32 a", 2, 0)
	if !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("third registration: %v, want ENOMEM", err)
	}
	if n := len(f.Events()); n != 3 || held != 2 {
		t.Fatalf("after the refusal: %d events in the file, %d held; want 3 and 2", n, held)
	}
	child := e.p.Fork(e.mem.fork())
	if held != 4 || forced != 3 { // 1 at SetCharge, 2 at the fork
		t.Fatalf("after a fork: held %d forced %d, want 4 and 3", held, forced)
	}
	cf := e.s.Open()
	defer cf.Close()
	if _, err := cf.Register(child, root, regArgs("charge_d u32 a", check, 3, 4, 0)); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("the child's registration over the account: %v, want ENOMEM", err)
	}
	child.Release()
	if err := e.unreg(0); err != nil {
		t.Fatal(err)
	}
	if held != 1 {
		t.Fatalf("after the child's exit and an unregister: held %d, want 1", held)
	}
	e.p.Release()
	if held != 0 {
		t.Fatalf("after release: held %d, want 0", held)
	}
}
