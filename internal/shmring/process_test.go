package shmring

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary a producer process: it maps the ring it
// inherited as fd 3 and writes into it from childStreams goroutines until it
// is killed. Its value "set" makes fd 3 a set of childSetRings rings, stream
// 0 writing into ring 1 and the others into ring 0.
const childEnv = "SHMRING_TEST_PRODUCER"

const childSetRings = 2

// childRing is the ring stream g of a child writes into: 0 for a plain
// ring; in a set, ring 1 for stream 0 (the one killed mid-record), ring 0
// for the others.
func childRing(set bool, g uint32) int {
	if set && g == 0 {
		return 1
	}
	return 0
}

const childStreams = 3

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		produceForever()
	}
	os.Exit(m.Run())
}

func produceForever() {
	set := os.Getenv(childEnv) == "set"
	var rings []*Producer
	if set {
		sp, err := OpenSet(3, childSetRings)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		for k := range childSetRings {
			rings = append(rings, sp.Ring(k))
		}
	} else {
		p, err := Open(3)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(2)
		}
		rings = append(rings, p)
	}
	progress, err := unix.Mmap(4, 0, 8*childStreams, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	for g := range uint32(childStreams) {
		go func() {
			// After each write, one store says how many this stream has
			// made and how many of them were dropped: the parent sees
			// both or neither.
			word := (*uint64)(unsafe.Pointer(&progress[8*g]))
			p := rings[childRing(set, g)]
			var pb [64]byte
			var drops uint64
			for i := uint32(0); ; i++ {
				pl := payloadFor(pb[:], g, i)
				var ok bool
				if g == 0 {
					// Stream 0 lingers between reservation and commit, so
					// that kills land there.
					var v Reservation
					if v, ok = p.Reserve(metaFor(g, i), len(pl)); ok {
						copy(v.Payload()[:4], pl)
						if i%8 == 0 {
							time.Sleep(time.Microsecond)
						} else {
							runtime.Gosched()
						}
						copy(v.Payload()[4:], pl[4:])
						v.Commit()
					}
				} else {
					ok = p.Write(metaFor(g, i), pl)
				}
				if !ok {
					drops++
				}
				atomic.StoreUint64(word, drops<<32|uint64(i+1))
			}
		}()
	}
	select {}
}

// fdsAndRingMaps counts the process's descriptors and its mappings of ring
// memfds.
func fdsAndRingMaps(t *testing.T) (fds, maps int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents), strings.Count(string(m), "/memfd:uetrace-ring")
}

// TestKilledProducers runs producer processes and kills each with SIGKILL
// at a random point, many times: the consumer delivers every record each
// committed, only whole and committed records, skips and counts what a kill
// left torn, and the losses add up: per stream, of the writes it finished
// (the child says how many, and how many were dropped, in a shared word),
// every one not dropped is delivered, and the ring's drop count is the
// streams' plus at most one write in flight each. No descriptor or mapping
// is left behind.
//
// In a set, the stream killed mid-record writes into ring 1 and the others
// into ring 0: ring 1's torn record is skipped and counted once the
// producer is declared gone, and ring 0 delivers everything committed.
func TestKilledProducers(t *testing.T) {
	t.Run("ring", func(t *testing.T) { killedProducers(t, false) })
	t.Run("set", func(t *testing.T) { killedProducers(t, true) })
}

func killedProducers(t *testing.T, set bool) {
	rounds := 25
	if testing.Short() {
		rounds = 5
	}
	fds0, maps0 := fdsAndRingMaps(t)
	var torn, discarded uint64
	for round := range rounds {
		st := killOne(t, round, set)
		torn += st.Torn
		discarded += st.Discarded
	}
	fds1, maps1 := fdsAndRingMaps(t)
	if fds1 != fds0 || maps1 != maps0 || maps1 != 0 {
		t.Errorf("after %d rounds: %d descriptors (%d before), %d ring mappings (%d before)", rounds, fds1, fds0, maps1, maps0)
	}
	t.Logf("%d rounds: %d torn records, %d bytes discarded", rounds, torn, discarded)
}

func killOne(t *testing.T, round int, set bool) Stats {
	var cs []*Consumer
	var memfd int
	if set {
		sp, err := CreateSet(childSetRings, 16384)
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		if cs, err = AttachSet(sp.Fd(), childSetRings); err != nil {
			t.Fatal(err)
		}
		memfd = sp.Fd()
	} else {
		p, err := Create(16384)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		c, err := Attach(p.Fd())
		if err != nil {
			t.Fatal(err)
		}
		cs, memfd = []*Consumer{c}, p.Fd()
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	dup, err := unix.FcntlInt(uintptr(memfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "ring")
	pfd, err := unix.MemfdCreate("progress", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	pf := os.NewFile(uintptr(pfd), "progress")
	defer pf.Close()
	if err := pf.Truncate(8 * childStreams); err != nil {
		t.Fatal(err)
	}
	progress, err := unix.Mmap(pfd, 0, 8*childStreams, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(progress)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	mode := "ring"
	if set {
		mode = "set"
	}
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "GOMAXPROCS=2")
	cmd.ExtraFiles = []*os.File{f, pf}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var last [childStreams]int64
	var seqs [childStreams][]uint32
	for g := range last {
		last[g] = -1
	}
	buf := make([]byte, cs[0].Size())
	deliver := func(k int, rec Record) {
		g, seq := checkRecord(t, rec)
		if g >= childStreams || int64(seq) <= last[g] {
			t.Fatalf("round %d: stream %d record %d after %d", round, g, seq, last[g])
		}
		if childRing(set, g) != k {
			t.Fatalf("round %d: stream %d's record in ring %d", round, g, k)
		}
		last[g] = int64(seq)
		seqs[g] = append(seqs[g], seq)
	}
	// Kill after a random number of records: somewhere in the middle of
	// the producers' loops, and with the ring sometimes full.
	target := 1 + rand.IntN(4000)
	var n int
	var exited atomic.Bool
	go func() {
		// A child that dies by itself (it should not) ends the round
		// instead of leaving the loop below waiting for records.
		for !exited.Load() {
			if err := unix.Kill(cmd.Process.Pid, 0); err != nil {
				exited.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for n < target && !exited.Load() {
		got := false
		for k, c := range cs {
			rec, err := c.Next(buf)
			if err == nil {
				deliver(k, rec)
				n++
				got = true
			}
		}
		if !got {
			cs[n%len(cs)].Wait(10 * time.Millisecond)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	err = cmd.Wait()
	exited.Store(true)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: the producer ended with %v, not killed: %s", round, err, stderr.String())
	}

	// Dead: drain what it left, to head.
	var st Stats
	var dropped uint64
	for k, c := range cs {
		c.ProducerGone()
		for {
			rec, err := c.Next(buf)
			if errors.Is(err, ErrNotReady) {
				break
			}
			deliver(k, rec)
		}
		if pend := c.Pending(); pend != 0 {
			t.Fatalf("round %d: ring %d: %d bytes left between tail and head after a full drain", round, k, pend)
		}
		cst := c.Stats()
		st.Records += cst.Records
		st.Torn += cst.Torn
		st.TooLong += cst.TooLong
		st.Discarded += cst.Discarded
		st.BadHead += cst.BadHead
		d, _ := c.Dropped()
		dropped += d
	}
	var drops uint64
	for g := range childStreams {
		// Every write the stream finished was committed or dropped: the
		// committed ones are all delivered. At most one more, the write
		// in flight at the kill, may have been delivered too.
		w := atomic.LoadUint64((*uint64)(unsafe.Pointer(&progress[8*g])))
		done, x := uint32(w), w>>32
		drops += x
		var below uint64
		for _, q := range seqs[g] {
			if q < done {
				below++
			} else if q != done {
				t.Fatalf("round %d: stream %d: record %d delivered, the stream had finished %d", round, g, q, done)
			}
		}
		if below != uint64(done)-x {
			t.Fatalf("round %d: stream %d finished %d writes, %d dropped, and %d of them were delivered", round, g, done, x, below)
		}
	}
	// The ring's count has the streams' drops, and the drop of a write in
	// flight at the kill.
	if dropped < drops || dropped > drops+childStreams {
		t.Fatalf("round %d: the ring counted %d drops, the streams %d", round, dropped, drops)
	}
	if st.Torn > childStreams || st.BadHead != 0 || st.TooLong != 0 {
		t.Fatalf("round %d: stats %+v: more torn records than streams, or a bad head", round, st)
	}
	if testing.Verbose() {
		t.Logf("round %d: killed after %d records: delivered %d, dropped %d, torn %d, discarded %d bytes",
			round, n, st.Records, dropped, st.Torn, st.Discarded)
	}
	return st
}
