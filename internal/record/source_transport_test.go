package record_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/userevents"
)

// TestRecordSessionTransports records the same writes through the
// session's streams and over the socket (as with a daemon that predates
// streams, or Options.SessionSocket):
// every file holds every record written or counts it lost — the file's
// PERF_RECORD_LOST records add up to Stats.Lost — each sample with its
// writer's name before it and the values written, in order on each CPU
// (streams hold each CPU's records apart, and perf's readers order them
// by time). The session's buffer is 32 KiB, so that it overflows while the
// writer runs in the daemon's process at full speed.
func TestRecordSessionTransports(t *testing.T) {
	for _, name := range []string{"streams", "socket"} {
		socket := name == "socket"
		t.Run(name, func(t *testing.T) {
			sys := subsys.New(subsys.Options{NumCPU: 2})
			sock := daemontest.Start(t, daemon.Config{Subsystem: sys, Cred: daemontest.Perfmon})
			f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ev, err := f.Register("transport_ev u64 seq; char[56] pad", 0)
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
			rec, err := record.Daemon(c, out, record.Options{Events: []string{"transport_ev"}, NoFollow: true, BufferKB: 32, SessionSocket: socket})
			if err != nil {
				t.Fatal(err)
			}
			if ring, why := rec.SharedMemory(); ring == socket || why != nil || rec.Streams() != (name == "streams") {
				t.Fatalf("SharedMemory() = %v, %v, Streams() %v; want %s", ring, why, rec.Streams(), name)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- rec.Run(ctx) }()
			waitEnabled(t, ev, waitLimit)
			const n = 20000
			payload := make([]byte, 64)
			for i := range n {
				binary.NativeEndian.PutUint64(payload, uint64(i))
				if err := ev.Write(payload); err != nil {
					t.Fatal(err)
				}
			}
			// While the recording runs, every record written comes to be
			// counted, recorded or lost: losses do not wait for a record
			// to follow them, nor for the end.
			deadline := time.Now().Add(waitLimit)
			for st := rec.Stats(); st.Samples+st.Lost != n; st = rec.Stats() {
				if time.Now().After(deadline) {
					t.Fatalf("after %v the recording counts %d recorded + %d lost of %d written", waitLimit, st.Samples, st.Lost, n)
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			st := rec.Stats()
			if st.Samples+st.Lost != n {
				t.Errorf("recorded %d + lost %d != written %d", st.Samples, st.Lost, n)
			}
			r, err := perfdata.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var samples, lost uint64
			next := map[uint32]uint64{}     // by CPU
			named := map[[2]uint32]string{} // by CPU and thread: each stream names its threads
			for {
				x, err := r.Next()
				if err != nil {
					break
				}
				switch x.Type {
				case perfdata.RecordComm:
					named[[2]uint32{x.Sample.CPU, x.TID}] = string(x.Comm)
					if name != "streams" {
						named[[2]uint32{0, x.TID}] = string(x.Comm)
					}
				case perfdata.RecordLost:
					lost += x.Lost
				case perfdata.RecordSample:
					samples++
					seq := binary.NativeEndian.Uint64(x.Sample.Raw[8:])
					cpu := x.Sample.CPU
					if seq < next[cpu] {
						t.Fatalf("sample %d after %d on CPU %d", seq, next[cpu]-1, cpu)
					}
					next[cpu] = seq + 1
					if name != "streams" {
						cpu = 0
					}
					if named[[2]uint32{cpu, x.Sample.TID}] == "" {
						t.Fatalf("sample of task %d before its name", x.Sample.TID)
					}
				}
			}
			if samples != st.Samples || lost != st.Lost {
				t.Errorf("the file holds %d samples and %d lost; Stats says %d and %d", samples, lost, st.Samples, st.Lost)
			}
			t.Logf("%d written: %d recorded, %d lost", n, samples, lost)
		})
	}
}
