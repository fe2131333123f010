package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Protocol is how requests are carried.
type Protocol int

const (
	// GRPC is a unary call of LogsService/Export over HTTP/2.
	GRPC Protocol = iota
	// HTTP is OTLP/HTTP: a protobuf POST to /v1/logs.
	HTTP
)

func (p Protocol) String() string {
	if p == HTTP {
		return "http/protobuf"
	}
	return "grpc"
}

// ParseProtocol reads "grpc" or "http" ("http/protobuf", OTel's name for it).
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "grpc":
		return GRPC, nil
	case "http", "http/protobuf":
		return HTTP, nil
	}
	return 0, fmt.Errorf("protocol %q: want grpc or http: %w", s, unix.EINVAL)
}

// DefaultEndpoint is the Collector's default address for the protocol:
// OTLP's ports, 4317 for gRPC and 4318 for HTTP.
func DefaultEndpoint(p Protocol) string {
	if p == HTTP {
		return "http://localhost:4318"
	}
	return "http://localhost:4317"
}

// Signal is what a request carries: logs, spans or metrics, each to a
// service of its own.
type Signal int

const (
	Logs Signal = iota
	Traces
	Metrics
)

func (s Signal) String() string { return [...]string{"logs", "traces", "metrics"}[s] }

// grpcPaths are the methods of the unary calls, as gRPC names them in the
// request's path (collector/{logs,trace,metrics}/v1/*_service.proto).
var grpcPaths = [...]string{
	Logs:    "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
	Traces:  "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
	Metrics: "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
}

// httpPaths are OTLP/HTTP's paths.
var httpPaths = [...]string{Logs: "/v1/logs", Traces: "/v1/traces", Metrics: "/v1/metrics"}

// GRPCPath is the logs call's method: GRPCPathOf(Logs).
const GRPCPath = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"

// HTTPPath is OTLP/HTTP's path for logs: HTTPPathOf(Logs).
const HTTPPath = "/v1/logs"

// GRPCPathOf is the method of s's unary call.
func GRPCPathOf(s Signal) string { return grpcPaths[s] }

// HTTPPathOf is OTLP/HTTP's path for s.
func HTTPPathOf(s Signal) string { return httpPaths[s] }

// Options configure a Client.
type Options struct {
	Protocol Protocol
	// Endpoint is the Collector's URL: "http://host:port" (gRPC over
	// cleartext HTTP/2, h2c, or plain HTTP) or "https://host:port" (TLS).
	// For HTTP a path other than "/" is the full URL of logs, as
	// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT has it; without one, /v1/logs.
	// Traces and metrics go to /v1/traces and /v1/metrics there, under
	// the path's prefix before /v1/logs.
	// Empty: DefaultEndpoint.
	Endpoint string
	// Headers are sent with every request (e.g. an authorization).
	Headers map[string]string
	// Timeout bounds each request; 0: 10 s.
	Timeout time.Duration
	// TLS configures https endpoints; nil: the system's roots.
	TLS *tls.Config
	// Gzip compresses requests (gRPC's grpc-encoding gzip, HTTP's
	// Content-Encoding gzip), as OTLP exporters' compression: gzip does.
	Gzip bool
}

// Client sends encoded ExportLogsServiceRequests. It is safe for
// concurrent use.
type Client struct {
	proto   Protocol
	url     string // the logs'
	urls    [3]string
	hc      *http.Client
	headers http.Header
	timeout time.Duration
	gzip    bool
}

// New makes a client; it does not connect until the first Export.
func New(o Options) (*Client, error) {
	ep := o.Endpoint
	if ep == "" {
		ep = DefaultEndpoint(o.Protocol)
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want http://host:port or https://host:port: %w", ep, unix.EINVAL)
	}
	c := &Client{proto: o.Protocol, headers: http.Header{}, timeout: o.Timeout, gzip: o.Gzip}
	if c.timeout <= 0 {
		c.timeout = 10 * time.Second
	}
	for k, v := range o.Headers {
		c.headers.Set(k, v)
	}
	tr := &http.Transport{
		TLSClientConfig:     o.TLS,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	switch o.Protocol {
	case GRPC:
		// gRPC is HTTP/2 only: with prior knowledge (h2c) on http://,
		// negotiated by ALPN on https://.
		var p http.Protocols
		if u.Scheme == "http" {
			p.SetUnencryptedHTTP2(true)
		} else {
			p.SetHTTP2(true)
		}
		tr.Protocols = &p
		base := strings.TrimSuffix(u.Path, "/")
		for sig := range grpcPaths {
			u.Path = base + grpcPaths[sig]
			c.urls[sig] = u.String()
		}
	case HTTP:
		logs := u.Path
		if logs == "" || logs == "/" {
			logs = HTTPPath
		}
		prefix, _ := strings.CutSuffix(logs, HTTPPath)
		for sig := range httpPaths {
			u.Path = prefix + httpPaths[sig]
			if Signal(sig) == Logs {
				u.Path = logs
			}
			c.urls[sig] = u.String()
		}
	default:
		return nil, fmt.Errorf("protocol %d: %w", o.Protocol, unix.EINVAL)
	}
	c.url = c.urls[Logs]
	c.hc = &http.Client{Transport: tr}
	return c, nil
}

// URL is where requests of logs go.
func (c *Client) URL() string { return c.url }

// URLOf is where requests of s go.
func (c *Client) URLOf(s Signal) string { return c.urls[s] }

// Protocol is the client's protocol.
func (c *Client) Protocol() Protocol { return c.proto }

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.hc.CloseIdleConnections() }

// Error is a failed export: what the server said, or why it could not be
// asked.
type Error struct {
	// Retryable says the same request may succeed later: OTLP's retryable
	// gRPC codes and HTTP statuses (429, 502, 503, 504), and failures to
	// reach the server.
	Retryable bool
	// RetryAfter is the delay the server asked for (Retry-After, or a
	// RetryInfo); 0 when it gave none.
	RetryAfter time.Duration
	HTTPStatus int   // the HTTP status; 0 when none came
	GRPCCode   int32 // the gRPC status (GRPC only); -1 when none came
	Message    string
	Err        error // the transport's error, if that is what failed
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("OTLP export failed: ")
	switch {
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	case e.GRPCCode > 0:
		fmt.Fprintf(&b, "gRPC status %d (%s)", e.GRPCCode, grpcCodeName(e.GRPCCode))
	default:
		fmt.Fprintf(&b, "HTTP %d %s", e.HTTPStatus, http.StatusText(e.HTTPStatus))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Retryable {
		b.WriteString(" (retryable)")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// gRPC status codes (grpc/codes).
const (
	codeOK                 = 0
	codeCanceled           = 1
	codeDeadlineExceeded   = 4
	codeResourceExhausted  = 8
	codeAborted            = 10
	codeOutOfRange         = 11
	codeUnimplemented      = 12
	codeUnavailable        = 14
	codeDataLoss           = 15
	codeInvalidArgument    = 3
	codeUnauthenticated    = 16
	codeInternal           = 13
	codePermissionDenied   = 7
	codeFailedPrecondition = 9
	codeNotFound           = 5
	codeAlreadyExists      = 6
	codeUnknown            = 2
)

func grpcCodeName(c int32) string {
	names := map[int32]string{
		codeOK: "OK", codeCanceled: "CANCELLED", codeUnknown: "UNKNOWN", codeInvalidArgument: "INVALID_ARGUMENT",
		codeDeadlineExceeded: "DEADLINE_EXCEEDED", codeNotFound: "NOT_FOUND", codeAlreadyExists: "ALREADY_EXISTS",
		codePermissionDenied: "PERMISSION_DENIED", codeResourceExhausted: "RESOURCE_EXHAUSTED",
		codeFailedPrecondition: "FAILED_PRECONDITION", codeAborted: "ABORTED", codeOutOfRange: "OUT_OF_RANGE",
		codeUnimplemented: "UNIMPLEMENTED", codeInternal: "INTERNAL", codeUnavailable: "UNAVAILABLE",
		codeDataLoss: "DATA_LOSS", codeUnauthenticated: "UNAUTHENTICATED",
	}
	if n, ok := names[c]; ok {
		return n
	}
	return "code " + strconv.Itoa(int(c))
}

// grpcRetryable is OTLP's list (specification/protocol/otlp.md, "Failures"):
// RESOURCE_EXHAUSTED only when the server says when to retry.
func grpcRetryable(code int32, retryInfo bool) bool {
	switch code {
	case codeCanceled, codeDeadlineExceeded, codeAborted, codeOutOfRange, codeUnavailable, codeDataLoss:
		return true
	case codeResourceExhausted:
		return retryInfo
	}
	return false
}

// httpRetryable is OTLP/HTTP's list of retryable statuses.
func httpRetryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// maxResponse bounds what is read of a response: an OTLP response is a
// few bytes; a bigger one is not a Collector's.
const maxResponse = 4 << 20

// Export sends one encoded ExportLogsServiceRequest: ExportSignal(ctx,
// Logs, req).
func (c *Client) Export(ctx context.Context, req []byte) (PartialSuccess, error) {
	return c.ExportSignal(ctx, Logs, req)
}

// ExportSignal sends one encoded Export*ServiceRequest of s. On success it
// returns the server's partial success (zero when it accepted everything;
// RejectedLogRecords counts the spans or data points rejected for the
// other signals, whose responses have the same shape); on failure an
// *Error.
func (c *Client) ExportSignal(ctx context.Context, s Signal, req []byte) (PartialSuccess, error) {
	return c.export(ctx, s, nil, req)
}

// Headroom is the room ExportFramed wants before a request: a gRPC
// frame's header.
const Headroom = 5

// ExportFramed is ExportSignal of the request in buf[Headroom:]. The
// first Headroom bytes are the client's to write: a gRPC request's frame
// header goes there, and the request, of hundreds of KiB, is not copied to
// be framed.
func (c *Client) ExportFramed(ctx context.Context, s Signal, buf []byte) (PartialSuccess, error) {
	if len(buf) < Headroom {
		return PartialSuccess{}, &Error{GRPCCode: -1, Err: fmt.Errorf("a request buffer of %d bytes, without the %d of headroom: %w", len(buf), Headroom, unix.EINVAL)}
	}
	return c.export(ctx, s, buf, buf[Headroom:])
}

// export sends req; framed, if not nil, is req with Headroom bytes before
// it.
func (c *Client) export(ctx context.Context, s Signal, framed, req []byte) (PartialSuccess, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.proto == HTTP {
		return c.exportHTTP(ctx, c.urls[s], req)
	}
	// A gRPC message is framed: a compressed flag byte, its length as a
	// big-endian u32, then the message.
	var body []byte
	switch {
	case c.gzip:
		body = AppendGRPCFrame(nil, gzipped(req))
		body[0] = 1 // compressed, by the grpc-encoding
	case framed != nil:
		body = framed
		body[0] = 0
		binary.BigEndian.PutUint32(body[1:], uint32(len(req)))
	default:
		body = AppendGRPCFrame(make([]byte, 0, Headroom+len(req)), req)
	}
	return c.exportGRPC(ctx, c.urls[s], body)
}

func (c *Client) newRequest(ctx context.Context, url string, body []byte) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Err: err, GRPCCode: -1}
	}
	for k, v := range c.headers {
		r.Header[k] = v
	}
	return r, nil
}

// transportError is a failure to get a response: always worth retrying
// (the server may be restarting), unless the caller gave up.
func transportError(ctx context.Context, err error) error {
	e := &Error{Err: err, GRPCCode: -1, Retryable: true}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		e.Retryable = false
	}
	return e
}

func (c *Client) exportHTTP(ctx context.Context, url string, body []byte) (PartialSuccess, error) {
	if c.gzip {
		body = gzipped(body)
	}
	req, err := c.newRequest(ctx, url, body)
	if err != nil {
		return PartialSuccess{}, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return PartialSuccess{}, transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return PartialSuccess{}, transportError(ctx, err)
	}
	if resp.StatusCode == http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/x-protobuf") {
			return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1,
				Message: fmt.Sprintf("response of type %q, not application/x-protobuf: is %s an OTLP/HTTP endpoint?", ct, c.url)}
		}
		ps, err := ParseResponse(data)
		if err != nil {
			return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Message: err.Error()}
		}
		return ps, nil
	}
	e := &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Retryable: httpRetryable(resp.StatusCode)}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf") {
		if st, err := ParseStatus(data); err == nil {
			e.Message = st.Message
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	return PartialSuccess{}, e
}

// gzipped is b compressed.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// gunzip decompresses a response, of at most maxResponse bytes.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, maxResponse))
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseUint(h, 10, 32); err == nil {
		return time.Duration(min(s, 86400)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), 24*time.Hour)
	}
	return 0
}

// exportGRPC sends a framed request.
func (c *Client) exportGRPC(ctx context.Context, to string, body []byte) (PartialSuccess, error) {
	req, err := c.newRequest(ctx, to, body)
	if err != nil {
		return PartialSuccess{}, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	if c.gzip {
		req.Header.Set("Grpc-Encoding", "gzip")
	}
	req.Header.Set("Te", "trailers")
	if dl, ok := ctx.Deadline(); ok {
		// The server may give up when we will: grpc-timeout in ms.
		req.Header.Set("Grpc-Timeout", strconv.FormatInt(max(time.Until(dl).Milliseconds(), 1), 10)+"m")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return PartialSuccess{}, transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return PartialSuccess{}, transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		// Not a gRPC answer: a proxy's. gRPC maps HTTP statuses to codes
		// (doc/http-grpc-status-mapping.md).
		e := &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Message: strings.TrimSpace(string(data[:min(len(data), 200)]))}
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			e.Retryable = true
			e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		return PartialSuccess{}, e
	}
	// The status is in the trailers, or in the headers of a
	// "trailers-only" response.
	get := func(k string) string {
		if v := resp.Trailer.Get(k); v != "" {
			return v
		}
		return resp.Header.Get(k)
	}
	status := get("Grpc-Status")
	if status == "" {
		return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Retryable: true,
			Message: "the response has no grpc-status: the stream was cut, or " + c.url + " is not a gRPC server"}
	}
	code, err := strconv.ParseInt(status, 10, 32)
	if err != nil {
		return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Message: fmt.Sprintf("grpc-status %q is not a number", status)}
	}
	if code != codeOK {
		e := &Error{HTTPStatus: resp.StatusCode, GRPCCode: int32(code)}
		e.Message = get("Grpc-Message")
		if m, err := url.PathUnescape(e.Message); err == nil {
			e.Message = m
		}
		retryInfo := false
		if d := get("Grpc-Status-Details-Bin"); d != "" {
			// Binary metadata is base64, padded or not.
			raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d, "="))
			if err == nil {
				if st, err := ParseStatus(raw); err == nil && st.RetryDelay > 0 {
					e.RetryAfter, retryInfo = st.RetryDelay, true
				}
			}
		}
		e.Retryable = grpcRetryable(e.GRPCCode, retryInfo)
		return PartialSuccess{}, e
	}
	if len(data) >= 5 && data[0] == 1 && resp.Header.Get("Grpc-Encoding") == "gzip" {
		// A server answers in the compression of the request.
		m, err := gunzip(data[5:])
		if err != nil {
			return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Message: "gzip response: " + err.Error()}
		}
		data = AppendGRPCFrame(nil, m)
	}
	m, err := parseGRPCFrame(data)
	if err != nil {
		return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Message: err.Error()}
	}
	ps, err := ParseResponse(m)
	if err != nil {
		return PartialSuccess{}, &Error{HTTPStatus: resp.StatusCode, GRPCCode: -1, Message: err.Error()}
	}
	return ps, nil
}

// parseGRPCFrame returns the one message of a unary response's body
// (empty when the body is: a response with no message is a default
// message to the caller, as grpc-go reads it only if the status is OK).
func parseGRPCFrame(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 5 {
		return nil, fmt.Errorf("gRPC response of %d bytes, shorter than a frame header: %w", len(b), unix.EBADMSG)
	}
	if b[0] != 0 {
		return nil, fmt.Errorf("gRPC response compressed (flag %d), which was not asked for: %w", b[0], unix.EBADMSG)
	}
	n := binary.BigEndian.Uint32(b[1:])
	if uint64(n) != uint64(len(b)-5) {
		return nil, fmt.Errorf("gRPC frame of %d bytes in a body of %d: %w", n, len(b)-5, unix.EBADMSG)
	}
	return b[5:], nil
}

// AppendGRPCFrame frames a message as gRPC sends it: what servers in
// tests answer with.
func AppendGRPCFrame(b, msg []byte) []byte {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// ParseGRPCFrame is parseGRPCFrame, for servers in tests reading a
// request.
func ParseGRPCFrame(b []byte) ([]byte, error) { return parseGRPCFrame(b) }
