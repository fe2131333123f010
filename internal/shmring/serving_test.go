package shmring

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBoundTriesWithHeadMovedByConsumer: a consumer that stores to head in
// a loop cannot keep a bounded producer's Reserve retrying: with a bound of
// one attempt, a Reserve whose compare-and-swap loses drops the record, and
// every record is written or counted dropped. There is always room — the
// consumer keeps tail a little behind head, and the test puts head back
// after each batch — so only the bound can drop.
func TestBoundTriesWithHeadMovedByConsumer(t *testing.T) {
	p, err := Create(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.BoundTries(1)
	const base = 1 << 40
	reset := func() {
		atomic.StoreUint64(p.r.head, base)
		atomic.StoreUint64(p.r.tail, base-1024)
	}
	reset()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for j := range uint64(1000) {
				atomic.StoreUint64(p.r.head, base+8*((i+j)&1))
			}
		}
	}()
	var wrote, n uint64
	deadline := time.Now().Add(time.Minute)
	for {
		reset()
		for range 1000 { // at most 40 KiB past base: always room
			if p.Write(Meta{Time: n}, []byte("12345678")) {
				wrote++
			}
			n++
		}
		if d, _ := p.Dropped(); d > 0 || time.Now().After(deadline) {
			break
		}
	}
	close(stop)
	<-done
	dropped, _ := p.Dropped()
	if dropped == 0 {
		t.Errorf("%d Reserves raced a consumer moving head and none gave up", n)
	}
	if wrote+dropped != n {
		t.Errorf("%d written + %d dropped != %d", wrote, dropped, n)
	}
}

// TestCommitQuietAndWake: CommitQuiet publishes without a system call and
// says whether the consumer sleeps; Wake wakes a consumer asleep in Wait,
// once per time it said it sleeps.
func TestCommitQuietAndWake(t *testing.T) {
	p, c := pair(t, 1<<16)
	v, ok := p.Reserve(Meta{}, 8)
	if !ok {
		t.Fatal("reserve")
	}
	if v.CommitQuiet() {
		t.Error("CommitQuiet says an awake consumer sleeps")
	}
	buf := make([]byte, c.Size())
	if _, err := c.Next(buf); err != nil {
		t.Fatal(err)
	}
	woke := make(chan bool)
	go func() { woke <- c.Wait(time.Minute) }()
	// Wait says it sleeps; then the record comes.
	deadline := time.Now().Add(time.Minute)
	for atomic.LoadUint32(p.r.sleeping) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the consumer never said it sleeps")
		}
		time.Sleep(time.Millisecond)
	}
	v, _ = p.Reserve(Meta{}, 8)
	if !v.CommitQuiet() {
		t.Error("CommitQuiet does not say the consumer sleeps")
	}
	if p.Wakes() != 0 {
		t.Error("CommitQuiet woke the consumer")
	}
	if !p.Wake() {
		t.Error("Wake did not wake a sleeping consumer")
	}
	if !<-woke {
		t.Error("the consumer woke to nothing")
	}
	if p.Wake() || p.Wakes() != 1 {
		t.Errorf("a second Wake woke again (%d wakes)", p.Wakes())
	}
}

// TestCloseFd: the producer's memfd can be closed once handed over; the
// mapping stays, and Close only unmaps.
func TestCloseFd(t *testing.T) {
	p, err := Create(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Attach(p.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fd := p.Fd()
	if err := p.CloseFd(); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("the memfd is still open: %v", err)
	}
	if p.Fd() != -1 || p.CloseFd() != nil {
		t.Error("a second CloseFd")
	}
	if !p.Write(Meta{Time: 7}, []byte("x")) {
		t.Fatal("write after CloseFd")
	}
	rec, err := c.Next(make([]byte, c.Size()))
	if err != nil || rec.Time != 7 {
		t.Errorf("read after CloseFd: %+v, %v", rec, err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
}
