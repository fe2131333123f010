package ehslog_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"regexp"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/eventheader/ehslog"
	"github.com/uetrace/uetrace/userevents"
	"github.com/uetrace/uetrace/userevents/usereventstest"
)

// What a program does: its slog records become EventHeader events of
// provider MyApp on user_events (the kernel's, else the daemon's), at
// tracepoints MyApp_L1K1 … MyApp_L5K1 by level. While nobody listens a
// log call costs the enable bit's check. This needs the kernel or a
// running `uetrace serve`, so it is compiled but not run; Example runs the
// same calls in-process.
func Example_program() {
	f, err := userevents.Open(nil) // the kernel, else the daemon
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	p, err := ehprovider.New(f, "MyApp", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	h, err := ehslog.New(p, nil) // registers MyApp_L1K1 … MyApp_L5K1
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(h)

	// perf record -e 'user_events:MyApp_L4K1' gets this one.
	logger.Info("request", "status", 200, "path", "/index.html", "dur", 1500*time.Microsecond)
	logger.Debug("cache miss", "key", "users/42") // MyApp_L5K1: nothing built unless enabled
}

// readBack reads one record of ss and prints its tracepoint and the event
// as Microsoft's decoder shows it, without the time, which changes with
// every run.
func readBack(ss *usereventstest.Session) {
	recs := ss.Records()
	ev, err := eventheader.Decode(recs[0].Name, recs[0].Payload())
	if err != nil {
		fmt.Println(err)
		return
	}
	js, _ := ev.AppendJSON(nil)
	fmt.Println(recs[0].Name)
	fmt.Println(regexp.MustCompile(`"time": "[^"]*", `).ReplaceAllString(string(js), ""))
}

// In-process, a session attaches to the provider's tracepoints (as `perf
// record -e 'user_events:MyApp_*'` would); the record read back decodes
// with eventheader.Decode.
func Example() {
	k := usereventstest.NewKernel(nil)
	f, err := userevents.Open(k.Options())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "MyApp", nil)
	defer p.Close()
	h, _ := ehslog.New(p, nil)
	logger := slog.New(h)
	fmt.Println("Info enabled:", logger.Enabled(context.Background(), slog.LevelInfo))

	ss, _ := k.NewSession("user_events:MyApp_L4K1")
	defer ss.Close() // Information only
	fmt.Println("Info enabled:", logger.Enabled(context.Background(), slog.LevelInfo))
	fmt.Println("Debug enabled:", logger.Enabled(context.Background(), slog.LevelDebug))

	logger.Info("request", "status", 200, "path", "/index.html", "dur", 1500*time.Microsecond)
	readBack(ss)
	// Output:
	// Info enabled: false
	// Info enabled: true
	// Debug enabled: false
	// MyApp_L4K1
	// { "n": "MyApp:Log", "level": "INFO", "msg": "request", "status": 200, "path": "/index.html", "dur": 1500000, "meta": { "level": 4, "keyword": "0x1" } }
}

// Groups are structs. The attributes of With and the groups of WithGroup
// are encoded once, when the logger is made; a record adds its own
// attributes in the innermost group.
func ExampleHandler_WithGroup() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	p, _ := ehprovider.New(f, "MyApp", nil)
	h, _ := ehslog.New(p, &ehslog.Options{EventName: "Http", Keyword: 0x4})
	ss, _ := k.NewSession("user_events:MyApp_*")
	defer ss.Close()

	logger := slog.New(h).With("svc", "api").WithGroup("req").With("id", 7)
	logger.Warn("slow", "ms", 812, slog.Group("peer", "addr", "10.0.0.1", "port", 443))
	readBack(ss)
	// Output:
	// MyApp_L3K4
	// { "n": "MyApp:Http", "level": "WARN", "msg": "slow", "svc": "api", "req": { "id": 7, "ms": 812, "peer": { "addr": "10.0.0.1", "port": 443 } }, "meta": { "level": 3, "keyword": "0x4" } }
}

// The EventHeader level of each slog level: a band of four from each named
// level up, as OpenTelemetry maps slog levels to severities and those to
// EventHeader levels.
func ExampleLevel() {
	for _, l := range []slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelInfo + 2,
		slog.LevelWarn, slog.LevelError, slog.LevelError + 3, slog.LevelError + 4} {
		fmt.Printf("%-8v %d\n", l, ehslog.Level(l))
	}
	// Output:
	// DEBUG-4  5
	// DEBUG    5
	// INFO     4
	// INFO+2   4
	// WARN     3
	// ERROR    2
	// ERROR+3  2
	// ERROR+4  1
}
