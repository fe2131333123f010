package shmring

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recSize is the ring size of a record of payload34.
var recSize = align8(HeaderSize + uint64(len(payload34)))

// TestWatermarkWakesOnce: a consumer that says it sleeps until the ring
// holds w bytes is woken by the commit that brings the ring to w bytes —
// not by any before it — and once only, however many commits follow.
func TestWatermarkWakesOnce(t *testing.T) {
	p, c := pair(t, 1<<16)
	const w = 4096
	if !c.SleepAt(w) {
		t.Fatal("SleepAt on an empty ring: must sleep")
	}
	for i := 1; i <= 200; i++ {
		p.Write(benchMeta, payload34)
		held := uint64(i) * recSize
		want := uint64(0)
		if held >= w {
			want = 1
		}
		if got := p.Wakes(); got != want {
			t.Fatalf("after %d records (%d bytes, watermark %d): %d wakes, want %d", i, held, w, got, want)
		}
	}
	if s := atomic.LoadUint32(c.r.sleeping); s != 0 {
		t.Fatalf("sleeping word %d after the wake, want 0", s)
	}
}

// TestWatermarkStaleTail: a producer whose copy of the tail is old — the
// consumer has taken everything since — does not wake a consumer asleep
// until w bytes: it decides on the shared tail.
func TestWatermarkStaleTail(t *testing.T) {
	const size = 1 << 16
	p, c := pair(t, size)
	buf := make([]byte, size)
	// Fill the ring until the producer had to load the shared tail, then
	// empty it: the producer's copy is now far behind.
	for p.Write(benchMeta, payload34) {
	}
	drainAll(c, buf)
	const w = 4096
	if !c.SleepAt(w) {
		t.Fatal("SleepAt on an empty ring: must sleep")
	}
	if stale := atomic.LoadUint64(p.r.head) - p.tail.Load(); stale < w {
		t.Fatalf("the producer's tail is only %d bytes behind: the test needs it stale", stale)
	}
	wakes := p.Wakes()
	p.Write(benchMeta, payload34)
	if p.Wakes() != wakes {
		t.Fatal("one record woke a consumer asleep until 4096 bytes: the producer's stale tail decided")
	}
	for uint64(c.Pending()) < w {
		p.Write(benchMeta, payload34)
	}
	if p.Wakes() != wakes+1 {
		t.Fatalf("%d wakes once the ring held %d bytes, want 1", p.Wakes()-wakes, c.Pending())
	}
}

// TestWatermarkTailCommittedLast: the record at the tail committed after
// the ones behind it, while the consumer sleeps, wakes it: the ring holds
// the watermark once it is committed, whatever its own end.
func TestWatermarkTailCommittedLast(t *testing.T) {
	p, c := pair(t, 1<<16)
	first, ok := p.Reserve(benchMeta, len(payload34))
	if !ok {
		t.Fatal("dropped")
	}
	copy(first.Payload(), payload34)
	for uint64(c.Pending()) < 4096 {
		p.Write(benchMeta, payload34)
	}
	// The tail's record is not committed: the consumer sleeps on a ring
	// that holds more than the watermark, reserved.
	if !c.SleepAt(1024) {
		t.Fatal("SleepAt with the tail's record uncommitted: must sleep")
	}
	first.Commit()
	if p.Wakes() != 1 {
		t.Fatalf("%d wakes after the tail's record was committed, want 1", p.Wakes())
	}
	// And a consumer that looks now does not sleep.
	if c.SleepAt(1024) {
		t.Fatal("SleepAt on a ring holding 4 KiB of committed records with a 1 KiB watermark: must not sleep")
	}
}

// TestWatermarkNoSleepWhenFull: SleepAt refuses to sleep when the ring
// already holds the watermark and its tail is ready — and when the
// producer is gone with anything left; it sleeps below the watermark.
func TestWatermarkNoSleepWhenFull(t *testing.T) {
	p, c := pair(t, 1<<16)
	p.Write(benchMeta, payload34)
	if !c.SleepAt(4096) {
		t.Fatal("one record, a 4 KiB watermark: must sleep")
	}
	c.Awake()
	if c.SleepAt(1) {
		t.Fatal("one record, watermark 1: must not sleep")
	}
	if c.SleepAt(uint32(recSize)) {
		t.Fatal("one record of exactly the watermark: must not sleep")
	}
	c.ProducerGone()
	if c.SleepAt(4096) {
		t.Fatal("a gone producer's record left: must not sleep")
	}
	if s := atomic.LoadUint32(c.r.sleeping); s != 0 {
		t.Fatalf("sleeping word %d after a refused sleep, want 0", s)
	}
}

// TestWatermarkWakesPerWatermark: a consumer that sleeps with watermark w
// whenever it has emptied the ring — as the daemon's drainers do — is
// woken at most once per w bytes published (and on its timeout), never
// per record.
func TestWatermarkWakesPerWatermark(t *testing.T) {
	const (
		size  = 1 << 20
		w     = size / 4
		total = 200_000
	)
	p, c := pair(t, size)
	var read atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	timeouts := 0
	go func() {
		defer wg.Done()
		buf := make([]byte, size)
		for {
			n := drainAll(c, buf)
			read.Add(uint64(n))
			if stop.Load() && n == 0 {
				return
			}
			if ready, _ := c.wait(w, 20*time.Millisecond); !ready && c.Pending() == 0 {
				timeouts++
			}
		}
	}()
	written := 0
	for written < total {
		// TryReserve: a record that finds the ring full is tried again,
		// not dropped.
		if v, ok := p.TryReserve(benchMeta, len(payload34)); ok {
			copy(v.Payload(), payload34)
			v.Commit()
			written++
		} else {
			time.Sleep(time.Millisecond) // the consumer is behind: wait for it, drop nothing
		}
	}
	for read.Load() < total {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	c.Interrupt()
	wg.Wait()
	bytes := uint64(total) * recSize
	if most := bytes/w + 1; p.Wakes() > most {
		t.Fatalf("%d wakes for %d bytes at a watermark of %d: want at most %d", p.Wakes(), bytes, w, most)
	}
	t.Logf("%d records, %d bytes: %d wakes, %d empty timeouts", total, bytes, p.Wakes(), timeouts)
}

// TestWaitAtWakes: a wait at a watermark returns, woken, once a producer
// on another goroutine brings the ring to the watermark — well before its
// timeout.
func TestWaitAtWakes(t *testing.T) {
	p, c := pair(t, 1<<16)
	done := make(chan bool)
	go func() {
		ready, _ := c.wait(2048, time.Hour)
		done <- ready
	}()
	for {
		select {
		case ready := <-done:
			if !ready {
				t.Fatal("the wait returned with nothing to read")
			}
			if c.Pending() < 2048 {
				t.Fatalf("woken with %d bytes, watermark 2048", c.Pending())
			}
			return
		default:
			p.Write(benchMeta, payload34)
			time.Sleep(100 * time.Microsecond)
		}
	}
}
