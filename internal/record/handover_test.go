package record_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/userevents"
)

// TestRecordHandOver: a recording that is the only consumer of a Go
// producer's event takes the producer's ring set from the daemon and
// reads it itself; every record written is in the file once or counted
// lost, each CPU's in order, each thread named before its first sample.
// With NoHandOver the same writes take the daemon's path, and nothing is
// handed over.
func TestRecordHandOver(t *testing.T) {
	for _, hand := range []bool{true, false} {
		name := map[bool]string{true: "handed", false: "drainers"}[hand]
		t.Run(name, func(t *testing.T) {
			sock := startDaemon(t)
			f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			evName := uniq("handover_ev")
			ev, err := f.Register(evName+" u64 seq", 0)
			if err != nil {
				t.Fatal(err)
			}
			c, err := client.Dial(sock, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			path := filepath.Join(t.TempDir(), "perf.data")
			out, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			rec, err := record.Daemon(c, out, record.Options{Events: []string{"user_events:" + evName}, NoFollow: true, NoHandOver: !hand})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- rec.Run(ctx) }()
			waitEnabled(t, ev, waitLimit)
			var p [8]byte
			// The first record makes the ring set; the recording takes it at
			// its next round.
			if err := ev.Write(p[:]); err != nil {
				t.Fatal(err)
			}
			if hand {
				deadline := time.Now().Add(waitLimit)
				for rec.Stats().HandOvers == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("no ring set handed over in %v", waitLimit)
					}
					time.Sleep(time.Millisecond)
				}
			}
			const n = 300_000
			// Records too large for perf's samples, among the others: lost,
			// and counted so (Stats.TooLarge), whoever reads the ring.
			const big = 3
			for i := uint64(1); i < n; i++ {
				binary.NativeEndian.PutUint64(p[:], i)
				if err := ev.Write(p[:]); err != nil {
					t.Fatal(err)
				}
				if i%(n/(big+1)) == 0 {
					// After a sync, so that the ring has room for it.
					if err := f.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := ev.Write(make([]byte, 9000)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(waitLimit)
			for st := rec.Stats(); st.Samples+st.Lost != n+big; st = rec.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("after %v the recording counts %d recorded + %d lost of %d written (handed %d, sets %d)", waitLimit, st.Samples, st.Lost, n, st.HandedRecords, st.HandOvers)
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			st := rec.Stats()
			if hand != (st.HandOvers > 0 && st.HandedRecords > 0) {
				t.Errorf("%d sets handed over, %d records read from them", st.HandOvers, st.HandedRecords)
			}
			if st.TooLarge != big {
				t.Errorf("Stats.TooLarge = %d, want %d", st.TooLarge, big)
			}
			r, err := perfdata.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var samples, lost uint64
			seen := make([]bool, n)
			named := map[[2]uint32]bool{}
			for {
				x, err := r.Next()
				if err != nil {
					break
				}
				switch x.Type {
				case perfdata.RecordComm:
					named[[2]uint32{x.Sample.CPU, x.TID}] = true
				case perfdata.RecordLost:
					lost += x.Lost
				case perfdata.RecordSample:
					samples++
					seq := binary.NativeEndian.Uint64(x.Sample.Raw[8:])
					if seq >= n || seen[seq] {
						t.Fatalf("sample %d: never written, or twice", seq)
					}
					seen[seq] = true
					if !named[[2]uint32{x.Sample.CPU, x.Sample.TID}] {
						t.Fatalf("sample of task %d before its name", x.Sample.TID)
					}
				}
			}
			if samples != st.Samples || lost != st.Lost || samples+lost != n+big {
				t.Errorf("the file holds %d samples and %d lost of %d written; Stats says %d and %d", samples, lost, n, st.Samples, st.Lost)
			}
			// As perf's readers read it, in time order round by round, the
			// writer's records come in the order it wrote them.
			checkTimeOrder(t, path)
			t.Logf("%d written: %d recorded, %d lost; %d sets handed over, %d records read from them", n, samples, lost, st.HandOvers, st.HandedRecords)
		})
	}
}
