package export_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/testutil"
)

// server is an OTLP test server (gRPC over h2c and OTLP/HTTP) whose
// answers the test chooses per request.
type server struct {
	srv *httptest.Server
	mu  sync.Mutex
	// reqs are the requests received, in order; records counts their
	// records.
	reqs    [][]otlp.ResourceLogs
	times   []time.Time
	records int
	// answer says how to answer request number i (from 0): an HTTP
	// status (200: OK), and for OK a count of rejected records.
	answer func(i int, r *http.Request) (status int, rejected int64, retryAfter string)
}

func newServer(t *testing.T) *server {
	s := &server{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s.srv.Config.Protocols = &p
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	grpc := r.URL.Path == otlp.GRPCPath
	if grpc {
		body, _ = otlp.ParseGRPCFrame(body)
	}
	rls, err := otlp.ParseRequest(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	i := len(s.reqs)
	s.reqs = append(s.reqs, rls)
	s.times = append(s.times, time.Now())
	answer := s.answer
	s.mu.Unlock()
	status, rejected, after := http.StatusOK, int64(0), ""
	if answer != nil {
		status, rejected, after = answer(i, r)
	}
	if status == http.StatusOK {
		n := 0
		for _, rl := range rls {
			n += len(rl.Records)
		}
		s.mu.Lock()
		s.records += n
		s.mu.Unlock()
	}
	if grpc {
		w.Header().Set("Content-Type", "application/grpc")
		if status != http.StatusOK {
			// UNAVAILABLE for the retryable, INVALID_ARGUMENT otherwise.
			code := "3"
			if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
				code = "14"
			}
			w.Header().Set("Grpc-Status", code)
			w.Header().Set("Grpc-Message", "test says no")
			return
		}
		w.Header().Set("Trailer", "Grpc-Status")
		w.Write(otlp.AppendGRPCFrame(nil, otlp.AppendResponse(nil, otlp.PartialSuccess{RejectedLogRecords: rejected, ErrorMessage: msg(rejected)})))
		w.Header().Set("Grpc-Status", "0")
		return
	}
	if status != http.StatusOK {
		if after != "" {
			w.Header().Set("Retry-After", after)
		}
		http.Error(w, "test says no", status)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(otlp.AppendResponse(nil, otlp.PartialSuccess{RejectedLogRecords: rejected, ErrorMessage: msg(rejected)}))
}

func msg(rejected int64) string {
	if rejected == 0 {
		return ""
	}
	return strconv.FormatInt(rejected, 10) + " bad"
}

func (s *server) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func newExporter(t *testing.T, s *server, p otlp.Protocol, o export.Options) *export.Exporter {
	t.Helper()
	o.Protocol, o.Endpoint, o.ServiceName = p, s.srv.URL, "export-test"
	if o.InitialBackoff == 0 {
		o.InitialBackoff = time.Millisecond
	}
	e, err := export.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// addAll adds the samples of wants.
func addAll(t *testing.T, e *export.Exporter, wants []want) {
	t.Helper()
	for i := range wants {
		if err := e.Add(context.Background(), &wants[i].sample); err != nil {
			t.Fatal(err)
		}
	}
}

// closeAndCheck closes e and checks that every record is counted once.
func closeAndCheck(t *testing.T, e *export.Exporter, timeout time.Duration) export.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	e.Close(ctx)
	st := e.Stats()
	if st.Received != st.Delivered+st.Rejected+st.Dropped() {
		t.Errorf("%d received, but %d delivered + %d rejected + %d dropped", st.Received, st.Delivered, st.Rejected, st.Dropped())
	}
	return st
}

var protocols = []otlp.Protocol{otlp.GRPC, otlp.HTTP}

func TestDeliverGroupsByProcess(t *testing.T) {
	_, wants := testFile(t, 10)
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			s := newServer(t)
			e := newExporter(t, s, p, export.Options{BatchSize: 100})
			addAll(t, e, wants[:5])
			other := wants[5].sample
			other.PID, other.ProcessComm = 7, "other"
			e.Add(context.Background(), &other)
			st := closeAndCheck(t, e, time.Minute)
			if st.Delivered != 6 || st.Requests != 1 {
				t.Fatalf("stats %+v, want 6 delivered in 1 request", st)
			}
			rls := s.reqs[0]
			if len(rls) != 2 || len(rls[0].Records) != 5 || len(rls[1].Records) != 1 {
				t.Fatalf("resources %+v, want 5 records of one process and 1 of another", rls)
			}
			if got := rls[1].Resource[1].Value.AsInt(); got != 7 {
				t.Errorf("second resource's process.pid %d", got)
			}
		})
	}
}

func TestRetryThenDeliver(t *testing.T) {
	_, wants := testFile(t, 30)
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			s := newServer(t)
			s.answer = func(i int, _ *http.Request) (int, int64, string) {
				if i < 3 {
					return http.StatusServiceUnavailable, 0, ""
				}
				return http.StatusOK, 0, ""
			}
			e := newExporter(t, s, p, export.Options{BatchSize: 30})
			addAll(t, e, wants)
			st := closeAndCheck(t, e, time.Minute)
			if st.Delivered != 30 || st.Retries != 3 || st.Requests != 4 || st.Dropped() != 0 {
				t.Errorf("stats %+v, want 30 delivered after 3 retries", st)
			}
		})
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	_, wants := testFile(t, 3)
	s := newServer(t)
	s.answer = func(i int, _ *http.Request) (int, int64, string) {
		if i == 0 {
			return http.StatusTooManyRequests, 0, "1"
		}
		return http.StatusOK, 0, ""
	}
	e := newExporter(t, s, otlp.HTTP, export.Options{BatchSize: 3})
	addAll(t, e, wants)
	st := closeAndCheck(t, e, time.Minute)
	if st.Delivered != 3 || st.Retries != 1 {
		t.Fatalf("stats %+v, want 3 delivered after a retry", st)
	}
	// The backoff is a millisecond; the server asked for a second.
	if d := s.times[1].Sub(s.times[0]); d < time.Second {
		t.Errorf("retried after %v, before the Retry-After of 1 s", d)
	}
}

func TestNotRetryableDropped(t *testing.T) {
	_, wants := testFile(t, 20)
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			s := newServer(t)
			s.answer = func(int, *http.Request) (int, int64, string) { return http.StatusBadRequest, 0, "" }
			e := newExporter(t, s, p, export.Options{BatchSize: 10})
			addAll(t, e, wants)
			st := closeAndCheck(t, e, time.Minute)
			if st.DroppedFailed != 20 || st.Requests != 2 || st.Retries != 0 || st.LastError == "" {
				t.Errorf("stats %+v, want 20 dropped as failed, 2 requests, no retry", st)
			}
		})
	}
}

func TestRetryForExhausted(t *testing.T) {
	_, wants := testFile(t, 5)
	s := newServer(t)
	s.answer = func(int, *http.Request) (int, int64, string) { return http.StatusServiceUnavailable, 0, "" }
	e := newExporter(t, s, otlp.GRPC, export.Options{BatchSize: 5, InitialBackoff: 10 * time.Millisecond, RetryFor: 200 * time.Millisecond})
	addAll(t, e, wants)
	st := closeAndCheck(t, e, time.Minute)
	if st.DroppedFailed != 5 || st.Retries == 0 {
		t.Errorf("stats %+v, want 5 dropped after retries", st)
	}
}

func TestPartialSuccessRejected(t *testing.T) {
	_, wants := testFile(t, 10)
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			s := newServer(t)
			s.answer = func(int, *http.Request) (int, int64, string) { return http.StatusOK, 3, "" }
			e := newExporter(t, s, p, export.Options{BatchSize: 10})
			addAll(t, e, wants)
			st := closeAndCheck(t, e, time.Minute)
			if st.Delivered != 7 || st.Rejected != 3 || st.LastError == "" {
				t.Errorf("stats %+v, want 7 delivered and 3 rejected", st)
			}
		})
	}
}

// TestQueueFullDrops: with one request in flight (held by the server) and
// the queue full, a further batch is dropped and counted; the rest is
// delivered when the server answers.
func TestQueueFullDrops(t *testing.T) {
	_, wants := testFile(t, 50)
	s := newServer(t)
	release := make(chan struct{})
	s.answer = func(i int, r *http.Request) (int, int64, string) {
		if i == 0 {
			<-release
		}
		return http.StatusOK, 0, ""
	}
	e := newExporter(t, s, otlp.GRPC, export.Options{BatchSize: 10, QueueSize: 1, Senders: 1, BatchDelay: time.Hour})
	addAll(t, e, wants[:10])
	testutil.Wait(t, "the first batch to be in flight", func() bool { return s.requests() == 1 })
	addAll(t, e, wants[10:20]) // queued
	addAll(t, e, wants[20:50]) // three batches: no room
	if st := e.Stats(); st.DroppedQueueFull != 30 || st.Queued != 1 {
		t.Errorf("stats %+v, want 30 dropped for a full queue, 1 batch queued", st)
	}
	close(release)
	st := closeAndCheck(t, e, time.Minute)
	if st.Delivered != 20 || st.DroppedQueueFull != 30 {
		t.Errorf("stats %+v, want 20 delivered, 30 dropped", st)
	}
}

// TestBlockWaits: with Block, a full queue makes Add wait instead.
func TestBlockWaits(t *testing.T) {
	_, wants := testFile(t, 50)
	s := newServer(t)
	e := newExporter(t, s, otlp.HTTP, export.Options{BatchSize: 10, QueueSize: 1, Senders: 1, Block: true})
	addAll(t, e, wants)
	st := closeAndCheck(t, e, time.Minute)
	if st.Delivered != 50 || st.Dropped() != 0 {
		t.Errorf("stats %+v, want all 50 delivered", st)
	}
}

// TestCloseTimeout: what cannot be sent by Close's deadline is dropped
// and counted, and Close returns.
func TestCloseTimeout(t *testing.T) {
	_, wants := testFile(t, 40)
	s := newServer(t)
	s.answer = func(int, *http.Request) (int, int64, string) { return http.StatusServiceUnavailable, 0, "" }
	e := newExporter(t, s, otlp.GRPC, export.Options{BatchSize: 10, InitialBackoff: 10 * time.Millisecond})
	addAll(t, e, wants)
	testutil.Wait(t, "a retry", func() bool { return e.Stats().Retries > 0 })
	start := time.Now()
	st := closeAndCheck(t, e, 100*time.Millisecond)
	if st.DroppedShutdown != 40 {
		t.Errorf("stats %+v, want 40 dropped at shutdown", st)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := e.Add(context.Background(), &wants[0].sample); err == nil {
		t.Error("Add after Close accepted")
	}
}

// TestBatchDelay: a batch that does not fill is sent after BatchDelay.
func TestBatchDelay(t *testing.T) {
	_, wants := testFile(t, 1)
	s := newServer(t)
	e := newExporter(t, s, otlp.HTTP, export.Options{BatchDelay: 10 * time.Millisecond})
	addAll(t, e, wants)
	testutil.Wait(t, "the batch to be sent", func() bool { return e.Stats().Delivered == 1 })
	closeAndCheck(t, e, time.Minute)
}

// BenchmarkAdd is the exporter's own cost per event: mapping a sample (a
// third plain, two thirds EventHeader), batching, encoding and sending it
// over gRPC to a server that reads the requests and answers OK without
// decoding them.
func BenchmarkAdd(b *testing.B) {
	_, wants := testFile(b, 3)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Status", "0")
	}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	defer srv.Close()
	e, err := export.New(export.Options{Endpoint: srv.URL, Block: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.Add(context.Background(), &wants[i%3].sample)
		i++
	}
	e.Close(context.Background())
	b.StopTimer()
	if st := e.Stats(); st.Delivered != st.Received {
		b.Fatalf("stats %+v", st)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
