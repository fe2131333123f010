package daemon

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/testutil"
)

// FuzzRingMerge drives a client's ring set of two rings with arbitrary
// operations — valid records of any write index, thread, CPU and time,
// loss records, records reserved and never committed, garbage written
// anywhere in the rings, heads moved anywhere — while two drainers drain
// it beside an honest set. The daemon must not crash, a flush must return,
// the honest set's records must all be delivered, and closing the hostile
// connection must release its set.
func FuzzRingMerge(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 2, 0, 255, 255, 3, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{4, 200, 1, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 1, 2, 3, 4, 5, 0, 0, 0, 0, 5, 255, 255, 255, 255, 255, 255, 255, 255})
	holdMax = 100 * time.Microsecond // a torn record must not slow every iteration
	f.Cleanup(func() { holdMax = holdMaxDefault })
	f.Add([]byte{0x80, 0, 1, 2, 3, 4, 5, 6, 7, 8, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5})
	s := serve(f, Config{Rings: 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		honest := newRingClient(t, s, "fz_honest", 1<<14)
		hostile := newRingClient(t, s, "fz_hostile", 1<<14)
		mem, headers := hostile.ring.hostile(t)
		before := s.RingStats().Delivered
		honestN := 0
		next := func(n int) []byte {
			if len(ops) < n {
				ops = append(ops, make([]byte, n-len(ops))...)
			}
			b := ops[:n]
			ops = ops[n:]
			return b
		}
		for len(ops) > 0 {
			op := next(1)[0]
			switch op % 6 {
			case 0: // a valid record of any index, thread, CPU
				m := next(9)
				hostile.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: uint32(m[0]) | uint32(m[1])<<24,
					TID: uint32(m[2]) << 8, CPU: uint32(m[3])}, m[4:4+int(m[4])%5])
			case 1: // a record with any time
				m := next(9)
				hostile.ring.Write(shmring.Meta{Time: wire.LE.Uint64(m[1:]), WriteIndex: hostile.idx, CPU: uint32(m[0])}, u32rec(7))
			case 2: // a loss record with any contents
				m := next(17)
				hostile.publish(wire.LostIndex, m[1:1+int(m[0])%17])
			case 3: // garbage anywhere in the memory but the first ring's header page
				m := next(5)
				page := unix.Getpagesize()
				off := page + int(wire.LE.Uint32(m[1:])>>8)%(len(mem)-page)
				copy(mem[off:], m[:2])
			case 4: // a ring's head moved anywhere
				m := next(9)
				h := headers[int(m[0])%len(headers)]
				wire.LE.PutUint64(mem[h+64:], wire.LE.Uint64(m[1:])^uint64(m[0]))
			case 5: // reserved, never committed
				m := next(1)
				hostile.ring.Reserve(shmring.Meta{WriteIndex: hostile.idx, CPU: uint32(m[0])}, int(m[0])%64)
			}
			if honest.publish(honest.idx, u32rec(uint32(honestN))) {
				honestN++
			}
		}
		s.Flush()
		testutil.Wait(t, "the honest ring's records", func() bool {
			s.Flush()
			return s.RingStats().Delivered-before >= uint64(honestN)
		})
		hostile.c.Close()
		honest.c.Close()
		testutil.Wait(t, "both rings released", func() bool { return ringsReleased(s) })
	})
}
