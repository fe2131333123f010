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

// TestFileCharge: a File opened with OpenCharged tells its Charge of each
// event its array gains — an event a registration that then fails leaves
// there included, as Linux leaves it — and of all of them at Close; a
// refusal is the registration's ENOMEM at user_events_ref_add, and an
// event created for it goes with the registration, holding nothing.
func TestFileCharge(t *testing.T) {
	e := newEnv(t)
	held := 0
	const most = 2
	f := e.s.OpenCharged(func(n int, force bool) error {
		if n > 0 && !force && held+n > most {
			return fmt.Errorf("over %d: %w", most, unix.ENOMEM)
		}
		held += n
		return nil
	})
	if _, err := e.reg(f, "fcharge_a u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.reg(f, "fcharge_a u32 a", 1, 0); err != nil || held != 1 {
		t.Fatalf("a second registration of the same event: %v, held %d; want it free", err, held)
	}
	// The enable word cannot be written: ENOMEM, the event stays in the
	// array, and counts.
	if _, err := f.Register(e.p, root, regArgs("fcharge_b u32 a", 0x7f0000000000, 0, 8, 0)); !errors.Is(err, unix.ENOMEM) || held != 2 {
		t.Fatalf("a registration whose word cannot be written: %v, held %d; want ENOMEM and 2", err, held)
	}
	if _, err := e.reg(f, "fcharge_c u32 a", 2, 0); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("a registration over the account: %v, want ENOMEM", err)
	}
	if e.exists("fcharge_c") || len(f.Events()) != 2 || held != 2 {
		t.Fatalf("after the refusal: fcharge_c exists %v, %d events in the file, %d held; want none of it", e.exists("fcharge_c"), len(f.Events()), held)
	}
	e.p.Release()
	f.Close()
	if held != 0 || e.exists("fcharge_a") || e.exists("fcharge_b") {
		t.Fatalf("after close: held %d; want 0 and the events gone", held)
	}
}
