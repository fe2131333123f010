package handover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// TestExactlyOnce: while a producer publishes records numbered 0..N-1
// into ring k, the reader passes over it and a goroutine acting as the
// daemon takes it back — now and then forcing it back in the middle of a
// pass — reads a little with its own consumer resumed at the tail taken
// back, and gives it again at its consumer's tail. Every record is then
// in the reader's committed output or the daemon's reads: none twice,
// none missing; and the counts the daemon reads at each take-back add up
// to what the reader committed.
func TestExactlyOnce(t *testing.T) {
	n := 200_000
	if testing.Short() || raceEnabled {
		n = 30_000
	}
	const k = 1
	f := newFixture(t, 2, 1<<14) // small: the ring wraps all the time
	f.set.Close()
	fd := f.sp.Fd()

	seen := make([]uint8, n) // by whom: 1 the reader, 2 the daemon
	var mu sync.Mutex
	var dups []string
	mark := func(seq uint32, by uint8) {
		mu.Lock()
		defer mu.Unlock()
		if int(seq) >= n {
			dups = append(dups, "a record numbered past the end")
			return
		}
		if seen[seq] != 0 && len(dups) < 10 {
			dups = append(dups, fmt.Sprintf("record %d read by %d after %d", seq, by, seen[seq]))
		}
		seen[seq] = by
	}

	grants := make(chan struct{}, 1)
	done := make(chan struct{})
	var stop atomic.Bool
	var readerDelivered, daemonCounted uint64
	var wg sync.WaitGroup
	// However the test ends, the goroutines end before the rings are
	// unmapped: the producer stops, the reader finds its ring gone.
	defer func() {
		if !stop.Load() {
			stop.Store(true)
			close(done)
			f.ctl.TakeBack(k, time.Second)
			wg.Wait()
		}
	}()

	// The producer. A ring found full is retried: nothing is dropped,
	// so that every number must come out.
	wg.Go(func() {
		runtime.LockOSThread()
		p := f.sp.Ring(k)
		var b [4]byte
		m := shmring.Meta{WriteIndex: idxPlain, TID: uint32(unix.Gettid()), CPU: k}
		for i := range n {
			binary.NativeEndian.PutUint32(b[:], uint32(i))
			for !stop.Load() {
				m.Time = stamp.Now()
				if r, ok := p.TryReserve(m, 4); ok {
					copy(r.Payload(), b[:])
					r.Commit()
					break
				}
				runtime.Gosched()
			}
		}
	})

	// The reader: a Set per grant, passes until the ring is gone.
	wg.Go(func() {
		out := NewStream(true)
		for {
			select {
			case <-grants:
			case <-done:
				return
			}
			set, err := OpenSet(f.g, fd, f.ctl.Fd())
			if err != nil {
				t.Error(err)
				return
			}
			for {
				_, gone := set.Pass(k, out, 1+rand.IntN(200))
				recs, err := readStream(out.Bytes())
				if err != nil {
					t.Error(err)
				}
				for _, r := range recs {
					if r.typ == 9 {
						mark(binary.NativeEndian.Uint32(r.raw[8:]), 1)
						readerDelivered++
					}
				}
				out.Reset()
				if gone || stop.Load() {
					break
				}
				runtime.Gosched()
			}
			set.Close()
		}
	})

	// The daemon.
	cons := f.daemon[k]
	buf := make([]byte, cons.Size())
	read := func(most int) int {
		got := 0
		for got < most {
			rec, err := cons.Next(buf)
			if errors.Is(err, shmring.ErrNotReady) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			mark(binary.NativeEndian.Uint32(rec.Payload), 2)
			got++
		}
		return got
	}
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for _, s := range seen {
			if s != 0 {
				c++
			}
		}
		return c
	}
	forcedN, takes, late := 0, 0, 0
	// The event counts the daemon took: of idxPlain, the producer's
	// event, written and dropped.
	var written [2]uint64
	countWritten := func(i int, g EventCounts) {
		if i != idxPlain {
			t.Errorf("event counts of write index %d, which no record has", i)
		}
		written[0] += g.Written
		written[1] += g.Dropped
	}
	var stall atomic.Bool
	passHook = func(int) {
		for stall.Load() {
			runtime.Gosched()
		}
	}
	defer func() { passHook = nil }()
	for total() < n {
		f.give(k)
		// A reader still passing over its last Set finds the ring
		// given again there (a pass goes on from the tail Begin says).
		select {
		case grants <- struct{}{}:
		default:
		}
		// Let the reader read for a while.
		for range 1 + rand.IntN(50) {
			runtime.Gosched()
		}
		var tail uint64
		var forced bool
		if takes%4 == 3 {
			// The reader stalls at its next commit; the daemon forces
			// the ring back from under it.
			stall.Store(true)
			for end := time.Now().Add(time.Second); own(f.ctl, k)&stateMask != Reading && time.Now().Before(end); {
				runtime.Gosched()
			}
			tail, forced = f.ctl.TakeBack(k, 0)
			stall.Store(false)
		} else {
			tail, forced = f.ctl.TakeBack(k, 5*time.Millisecond)
		}
		takes++
		if forced {
			forcedN++
		}
		// Not as of the tail when the reader's store of a commit came
		// late (after the ring was given again): what they grew by comes
		// with a later take.
		cs, ok := f.ctl.TakeCounts(k, tail, 10*time.Millisecond, countWritten)
		if !ok {
			late++
		}
		daemonCounted += cs.Delivered
		cons.Resume(tail)
		read(rand.IntN(100))
	}
	stop.Store(true)
	close(done)
	wg.Wait()
	read(n)                                          // nothing may be left
	cs, _ := f.ctl.TakeCounts(k, 0, 0, countWritten) // a store after the last take-back
	daemonCounted += cs.Delivered
	mu.Lock()
	defer mu.Unlock()
	for _, d := range dups {
		t.Error(d)
	}
	for i, s := range seen {
		if s == 0 {
			t.Fatalf("record %d never read", i)
		}
	}
	if readerDelivered != daemonCounted {
		t.Errorf("the reader delivered %d records, its counts at the take-backs say %d", readerDelivered, daemonCounted)
	}
	if written != [2]uint64{uint64(readerDelivered), 0} {
		t.Errorf("the reader delivered %d records, its event counts at the take-backs say %d written, %d dropped", readerDelivered, written[0], written[1])
	}
	if forcedN == 0 {
		t.Error("no take-back was forced: the discarded passes were not tested")
	}
	t.Logf("%d records: %d by the reader, %d take-backs (%d forced, %d before the counts were stored)", n, readerDelivered, takes, forcedN, late)
}
