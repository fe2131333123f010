package otlp

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"
)

func sampleRequest() []ResourceLogs {
	return []ResourceLogs{{
		Resource: []KeyValue{{"host.name", StringValue("h")}, {"process.pid", IntValue(42)}},
		Scope:    Scope{Name: "uetrace", Version: "1"},
		Records: []Record{{
			Time: 1700000000123456789, ObservedTime: 1700000000200000000,
			SeverityNumber: SeverityWarn, SeverityText: "WARN", EventName: "user_events:x",
			Body: StringValue("body"),
			Attributes: []KeyValue{
				{"s", StringValue("")}, {"i", IntValue(-5)}, {"zero", IntValue(0)}, {"d", DoubleValue(math.Pi)},
				{"b", BoolValue(false)}, {"t", BoolValue(true)}, {"raw", BytesValue([]byte{0, 1, 2})},
				{"arr", ArrayValue([]Value{IntValue(1), StringValue("two"), ArrayValue([]Value{})})},
				{"m", MapValue([]KeyValue{{"x", IntValue(1)}, {"nested", MapValue([]KeyValue{})}})},
				{"big", StringValue(string(make([]byte, 300)))},
			},
			Flags: 1, TraceID: make([]byte, 16), SpanID: []byte{1, 2, 3, 4, 5, 6, 7, 8},
		}, {EventName: "empty"}},
	}, {Resource: []KeyValue{{"process.pid", IntValue(7)}}}}
}

func TestRequestRoundTrip(t *testing.T) {
	want := sampleRequest()
	b := AppendRequest(nil, want)
	got, err := ParseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	// An empty ArrayValue and KeyValueList read back as empty, not nil.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestRequestWire checks the bytes of a small request field by field
// against the field numbers of opentelemetry-proto, independently of
// ParseRequest.
func TestRequestWire(t *testing.T) {
	b := AppendRequest(nil, []ResourceLogs{{
		Records: []Record{{Time: 5, SeverityNumber: 9, EventName: "e", Attributes: []KeyValue{{"k", IntValue(3)}}}},
	}})
	var w []byte
	rec := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	rec = protowire.AppendFixed64(rec, 5)
	rec = protowire.AppendTag(rec, 2, protowire.VarintType)
	rec = protowire.AppendVarint(rec, 9)
	any := protowire.AppendTag(nil, 3, protowire.VarintType)
	any = protowire.AppendVarint(any, 3)
	kv := protowire.AppendTag(nil, 1, protowire.BytesType)
	kv = protowire.AppendString(kv, "k")
	kv = protowire.AppendTag(kv, 2, protowire.BytesType)
	kv = protowire.AppendBytes(kv, any)
	rec = protowire.AppendTag(rec, 6, protowire.BytesType)
	rec = protowire.AppendBytes(rec, kv)
	rec = protowire.AppendTag(rec, 12, protowire.BytesType)
	rec = protowire.AppendString(rec, "e")
	scope := protowire.AppendTag(nil, 1, protowire.BytesType) // empty InstrumentationScope
	scope = protowire.AppendBytes(scope, nil)
	scope = protowire.AppendTag(scope, 2, protowire.BytesType)
	scope = protowire.AppendBytes(scope, rec)
	rl := protowire.AppendTag(nil, 1, protowire.BytesType) // empty Resource
	rl = protowire.AppendBytes(rl, nil)
	rl = protowire.AppendTag(rl, 2, protowire.BytesType)
	rl = protowire.AppendBytes(rl, scope)
	w = protowire.AppendTag(w, 1, protowire.BytesType)
	w = protowire.AppendBytes(w, rl)
	if diff := cmp.Diff(w, b); diff != "" {
		t.Errorf("wire bytes (-want +got):\n%s", diff)
	}
}

func TestAppendMessageLengths(t *testing.T) {
	// Lengths around each varint size boundary survive the move down.
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 70000} {
		r := []ResourceLogs{{Records: []Record{{EventName: string(make([]byte, n))}}}}
		got, err := ParseRequest(AppendRequest(nil, r))
		if err != nil || len(got) != 1 || len(got[0].Records) != 1 || len(got[0].Records[0].EventName) != n {
			t.Errorf("event name of %d bytes: %v", n, err)
		}
	}
}

func TestStatusRoundTrip(t *testing.T) {
	for _, st := range []Status{{}, {Code: 14, Message: "down"}, {Code: 8, Message: "slow", RetryDelay: 1500 * time.Millisecond}} {
		got, err := ParseStatus(AppendStatus(nil, st))
		if err != nil || got != st {
			t.Errorf("status %+v: got %+v, %v", st, got, err)
		}
	}
	for _, ps := range []PartialSuccess{{}, {RejectedLogRecords: 3, ErrorMessage: "bad"}} {
		got, err := ParseResponse(AppendResponse(nil, ps))
		if err != nil || got != ps {
			t.Errorf("response %+v: got %+v, %v", ps, got, err)
		}
	}
}

// server is an OTLP test server: gRPC over h2c and OTLP/HTTP on one port.
type server struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   [][]ResourceLogs
	reply func(w http.ResponseWriter, grpc bool) bool // true: replied
}

func newServer(t *testing.T) *server {
	s := &server{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		grpc := r.URL.Path == GRPCPath
		if grpc {
			if r.ProtoMajor != 2 || r.Header.Get("Content-Type") != "application/grpc" {
				http.Error(w, "not grpc", http.StatusBadRequest)
				return
			}
			if len(body) >= 5 && body[0] == 1 && r.Header.Get("Grpc-Encoding") == "gzip" {
				m, err := gunzip(body[5:])
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				body = AppendGRPCFrame(nil, m)
			}
			var err error
			if body, err = ParseGRPCFrame(body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		} else if r.URL.Path != HTTPPath || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not OTLP/HTTP", http.StatusNotFound)
			return
		} else if r.Header.Get("Content-Encoding") == "gzip" {
			var err error
			if body, err = gunzip(body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		rls, err := ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, rls)
		reply := s.reply
		s.mu.Unlock()
		if reply != nil && reply(w, grpc) {
			return
		}
		if grpc {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.Write(AppendGRPCFrame(nil, AppendResponse(nil, PartialSuccess{})))
			w.Header().Set("Grpc-Status", "0")
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(AppendResponse(nil, PartialSuccess{}))
	})
	s.srv = httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s.srv.Config.Protocols = &p
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) setReply(f func(w http.ResponseWriter, grpc bool) bool) {
	s.mu.Lock()
	s.reply = f
	s.mu.Unlock()
}

func newClient(t *testing.T, p Protocol, endpoint string) *Client {
	c, err := New(Options{Protocol: p, Endpoint: endpoint, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdle)
	return c
}

func TestExportDelivers(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Protocol
		gzip bool
	}{{"grpc", GRPC, false}, {"http", HTTP, false}, {"grpc-gzip", GRPC, true}, {"http-gzip", HTTP, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			c, err := New(Options{Protocol: tc.p, Endpoint: s.srv.URL, Gzip: tc.gzip})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdle()
			want := sampleRequest()
			ps, err := c.Export(context.Background(), AppendRequest(nil, want))
			if err != nil || ps != (PartialSuccess{}) {
				t.Fatalf("Export: %+v, %v", ps, err)
			}
			// The same request after headroom for the client, twice:
			// as a retry sends it again.
			framed := AppendRequest(make([]byte, Headroom), want)
			for range 2 {
				if ps, err := c.ExportFramed(context.Background(), Logs, framed); err != nil || ps != (PartialSuccess{}) {
					t.Fatalf("ExportFramed: %+v, %v", ps, err)
				}
			}
			if len(s.got) != 3 {
				t.Fatalf("server got %d requests, want 3", len(s.got))
			}
			for i := range s.got {
				if diff := cmp.Diff(want, s.got[i]); diff != "" {
					t.Errorf("request %d: server got (-want +got):\n%s", i, diff)
				}
			}
			if _, err := c.ExportFramed(context.Background(), Logs, make([]byte, Headroom-1)); !errors.Is(err, unix.EINVAL) {
				t.Errorf("ExportFramed without the headroom: %v, want EINVAL", err)
			}
		})
	}
}

func grpcStatus(w http.ResponseWriter, code int, msg string, details []byte) {
	w.Header().Set("Content-Type", "application/grpc")
	// Trailers-only: the status in the headers.
	w.Header().Set("Grpc-Status", strconv.Itoa(code))
	w.Header().Set("Grpc-Message", msg)
	if details != nil {
		w.Header().Set("Grpc-Status-Details-Bin", base64.RawStdEncoding.EncodeToString(details))
	}
	w.WriteHeader(http.StatusOK)
}

func TestExportStatuses(t *testing.T) {
	type want struct {
		retryable  bool
		after      time.Duration
		code       int32
		httpStatus int
		msg        string
	}
	cases := []struct {
		name  string
		p     Protocol
		reply func(w http.ResponseWriter)
		want  *want // nil: success
		ps    PartialSuccess
	}{
		{"grpc partial", GRPC, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.Write(AppendGRPCFrame(nil, AppendResponse(nil, PartialSuccess{2, "two bad"})))
			w.Header().Set("Grpc-Status", "0")
		}, nil, PartialSuccess{2, "two bad"}},
		{"grpc unavailable", GRPC, func(w http.ResponseWriter) { grpcStatus(w, 14, "down%20now", nil) },
			&want{retryable: true, code: 14, httpStatus: 200, msg: "down now"}, PartialSuccess{}},
		{"grpc exhausted no retryinfo", GRPC, func(w http.ResponseWriter) { grpcStatus(w, 8, "full", nil) },
			&want{code: 8, httpStatus: 200, msg: "full"}, PartialSuccess{}},
		{"grpc exhausted retryinfo", GRPC, func(w http.ResponseWriter) {
			grpcStatus(w, 8, "full", AppendStatus(nil, Status{Code: 8, Message: "full", RetryDelay: 3 * time.Second}))
		}, &want{retryable: true, after: 3 * time.Second, code: 8, httpStatus: 200, msg: "full"}, PartialSuccess{}},
		{"grpc invalid", GRPC, func(w http.ResponseWriter) { grpcStatus(w, 3, "bad", nil) },
			&want{code: 3, httpStatus: 200, msg: "bad"}, PartialSuccess{}},
		{"grpc proxy 503", GRPC, func(w http.ResponseWriter) { http.Error(w, "busy", http.StatusServiceUnavailable) },
			&want{retryable: true, code: -1, httpStatus: 503, msg: "busy"}, PartialSuccess{}},
		{"http partial", HTTP, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.Write(AppendResponse(nil, PartialSuccess{1, "one"}))
		}, nil, PartialSuccess{1, "one"}},
		{"http 429", HTTP, func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(429)
			w.Write(AppendStatus(nil, Status{Code: 8, Message: "slow down"}))
		}, &want{retryable: true, after: 7 * time.Second, code: -1, httpStatus: 429, msg: "slow down"}, PartialSuccess{}},
		{"http 502", HTTP, func(w http.ResponseWriter) { http.Error(w, "gw", http.StatusBadGateway) },
			&want{retryable: true, code: -1, httpStatus: 502, msg: "gw"}, PartialSuccess{}},
		{"http 504", HTTP, func(w http.ResponseWriter) { http.Error(w, "gw", http.StatusGatewayTimeout) },
			&want{retryable: true, code: -1, httpStatus: 504, msg: "gw"}, PartialSuccess{}},
		{"http 400", HTTP, func(w http.ResponseWriter) { http.Error(w, "bad", http.StatusBadRequest) },
			&want{code: -1, httpStatus: 400, msg: "bad"}, PartialSuccess{}},
		{"http 500", HTTP, func(w http.ResponseWriter) { http.Error(w, "oops", http.StatusInternalServerError) },
			&want{code: -1, httpStatus: 500, msg: "oops"}, PartialSuccess{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			s.setReply(func(w http.ResponseWriter, _ bool) bool { tc.reply(w); return true })
			c := newClient(t, tc.p, s.srv.URL)
			ps, err := c.Export(context.Background(), AppendRequest(nil, sampleRequest()))
			if tc.want == nil {
				if err != nil || ps != tc.ps {
					t.Fatalf("got %+v, %v; want %+v", ps, err, tc.ps)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %+v, %v; want an *Error", ps, err)
			}
			got := want{e.Retryable, e.RetryAfter, e.GRPCCode, e.HTTPStatus, e.Message}
			if got != *tc.want {
				t.Errorf("got %+v (%v), want %+v", got, err, *tc.want)
			}
		})
	}
}

func TestExportRefusedIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	for _, p := range []Protocol{GRPC, HTTP} {
		c := newClient(t, p, "http://"+addr)
		_, err := c.Export(context.Background(), AppendRequest(nil, sampleRequest()))
		var e *Error
		if !errors.As(err, &e) || !e.Retryable || e.Err == nil {
			t.Errorf("%v: got %v, want a retryable transport error", p, err)
		}
	}
}

func TestNewEndpoints(t *testing.T) {
	for _, tc := range []struct {
		p        Protocol
		endpoint string
		url      string
	}{
		{GRPC, "", "http://localhost:4317" + GRPCPath},
		{HTTP, "", "http://localhost:4318/v1/logs"},
		{HTTP, "https://c:443/", "https://c:443/v1/logs"},
		{HTTP, "http://c:80/custom/logs", "http://c:80/custom/logs"},
		{GRPC, "https://c:4317", "https://c:4317" + GRPCPath},
	} {
		c, err := New(Options{Protocol: tc.p, Endpoint: tc.endpoint})
		if err != nil || c.URL() != tc.url {
			t.Errorf("%v %q: %v, %v; want %s", tc.p, tc.endpoint, c.URL(), err, tc.url)
		}
	}
	for _, bad := range []string{"localhost:4317", "ftp://x", "http://"} {
		if _, err := New(Options{Endpoint: bad}); err == nil {
			t.Errorf("endpoint %q accepted", bad)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "x": 0, "99999999": 24 * time.Hour,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := parseRetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", h, got, want)
		}
	}
}

func BenchmarkAppendRequest(b *testing.B) {
	rls := sampleRequest()
	buf := AppendRequest(nil, rls)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		buf = AppendRequest(buf[:0], rls)
	}
}

// TestExportTLS: https endpoints, gRPC negotiating HTTP/2 by ALPN.
func TestExportTLS(t *testing.T) {
	var mu sync.Mutex
	protos := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		protos[r.URL.Path] = r.ProtoMajor
		mu.Unlock()
		if r.URL.Path == GRPCPath {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "0")
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tlsConf := srv.Client().Transport.(*http.Transport).TLSClientConfig
	for _, p := range []Protocol{GRPC, HTTP} {
		c, err := New(Options{Protocol: p, Endpoint: srv.URL, TLS: tlsConf})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Export(context.Background(), AppendRequest(nil, sampleRequest())); err != nil {
			t.Errorf("%v over TLS: %v", p, err)
		}
		c.CloseIdle()
	}
	if protos[GRPCPath] != 2 {
		t.Errorf("gRPC went over HTTP/%d", protos[GRPCPath])
	}
}
