package fuse

import (
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

// write is a WRITE request of data to fh at offset 0.
func write(unique, node, fh uint64, data string) []byte {
	return req(opWrite, unique, node, append(fields(fh, uint64(0), uint32(len(data)), uint32(0), uint64(0), uint32(0), uint32(0)), data...))
}

// TestFakeInlineWrite: a write of an InlineWriter is answered, and its
// handler answers it (Commit is true).
func TestFakeInlineWrite(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	node, fh := k.lookupOpen(t, 10, "inline")
	for i := range uint64(3) {
		e, out := k.call(t, write(20+2*i, node, fh, "hello"))
		if e != 0 || len(out) != writeOutSize || le.Uint32(out) != 5 {
			t.Fatalf("WRITE answered %v %x, want 5 bytes written", e, out)
		}
		if ok := <-k.fs.files["inline"].commits; !ok {
			t.Fatal("Commit was false for a write nobody else answered")
		}
	}
	// The answer is sent before the request's accounting ends: wait for
	// it to end, rather than read it at once.
	testutil.Wait(t, "no request in flight after their answers", func() bool { return k.c.Stats().InFlight == 0 })
}

// TestFakeInlineStall: a write answered inline whose handler never returns
// holds up neither the connection's other requests (another reader takes
// over) nor its own caller for longer than StallLimit (the server answers it
// EFAULT); when the handler returns at last, Commit tells it so and nothing
// is answered twice.
func TestFakeInlineStall(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	node, fh := k.lookupOpen(t, 10, "inline")
	f := k.fs.files["inline"]
	sent := time.Now()
	k.send(t, write(20, node, fh, "stall"))
	k.fs.waitEvent(t, "inline-stalled")
	// Another request is answered while the write stalls: the reading went
	// to another goroutine.
	if e, _ := k.call(t, req(opStatfs, 22, rootID, nil)); e != 0 {
		t.Fatalf("STATFS beside the stalled write: %v", e)
	}
	// An INTERRUPT of the stalled write is not answered (nor does it end
	// the write): the write is answered EFAULT after StallLimit.
	k.send(t, req(opInterrupt, 24, 0, fields(uint64(20))))
	u, e, _ := k.recv(t)
	if u != 20 || e != unix.EFAULT {
		t.Fatalf("the stalled write was answered %d %v, want 20 EFAULT", u, e)
	}
	if d := time.Since(sent); d < StallLimit {
		t.Errorf("the stalled write was answered after %v, before StallLimit (%v)", d, StallLimit)
	}
	if st := k.c.Stats(); st.InFlight != 1 {
		t.Errorf("%d requests in flight while the stalled handler runs, want 1", st.InFlight)
	}
	close(f.stall)
	if ok := <-f.commits; ok {
		t.Error("Commit was true for the write the server answered EFAULT")
	}
	// Nothing more was answered for it: the next reply is the next
	// request's.
	if e, out := k.call(t, write(26, node, fh, "after")); e != 0 || le.Uint32(out) != 5 {
		t.Fatalf("the write after the stall answered %v %x", e, out)
	}
	if ok := <-f.commits; !ok {
		t.Error("Commit was false for the write after the stall")
	}
	deadline := time.Now().Add(childTimeout)
	for k.c.Stats().InFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight %v after the stalled handler returned", k.c.Stats().InFlight, childTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFakeUnmountWakesReader: Unmount ends the serving whether the reader
// waits for a request in the kernel (just after one) or, idle, in the
// runtime's poller.
func TestFakeUnmountWakesReader(t *testing.T) {
	for _, idle := range []bool{false, true} {
		name := map[bool]string{false: "kernel", true: "poller"}[idle]
		t.Run(name, func(t *testing.T) {
			k, _ := newFakeKernel(t, 45)
			node, fh := k.lookupOpen(t, 10, "inline")
			if e, _ := k.call(t, write(20, node, fh, "x")); e != 0 {
				t.Fatalf("WRITE: %v", e)
			}
			<-k.fs.files["inline"].commits
			if idle {
				deadline := time.Now().Add(childTimeout)
				for {
					k.c.mu.Lock()
					waiting := k.c.idle != nil
					k.c.mu.Unlock()
					if waiting {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the reader did not wait in the poller within %v", childTimeout)
					}
					time.Sleep(time.Millisecond)
				}
			}
			done := make(chan error, 1)
			go func() { done <- k.c.Unmount() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Unmount: %v", err)
				}
			case <-time.After(childTimeout):
				t.Fatalf("Unmount did not return within %v", childTimeout)
			}
			select {
			case <-k.c.done:
			default:
				t.Error("the serving had not ended when Unmount returned")
			}
		})
	}
}

// BenchmarkInlineWrite is the server's side of a write answered inline,
// through the fake kernel's socket: 0 allocations.
func BenchmarkInlineWrite(b *testing.B) {
	k, _ := newFakeKernel(b, 45)
	f := k.fs.files["inline"]
	f.commits = make(chan bool, 1)
	go func() {
		for range f.commits {
		}
	}()
	b.Cleanup(func() { close(f.commits) })
	node, fh := k.lookupOpen(b, 10, "inline")
	w := write(20, node, fh, "[index][payload]")
	var out [64]byte
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unix.Write(k.fd, w); err != nil {
			b.Fatal(err)
		}
		n, err := unix.Read(k.fd, out[:])
		if err != nil || n != outHeaderSize+writeOutSize {
			b.Fatalf("reply of %d bytes, %v", n, err)
		}
	}
}
