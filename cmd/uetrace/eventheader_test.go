package main

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// describe explains an EventHeader tracepoint, then the format file of the
// command it is registered with.
func TestDescribeEventHeader(t *testing.T) {
	out, err := run("describe", "MyProvider_L4K1Gmygroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# EventHeader tracepoint MyProvider_L4K1Gmygroup\n",
		"provider: MyProvider\n", "level:    4 (information)\n", "keyword:  0x1\n", "group:    mygroup\n",
		"register: MyProvider_L4K1Gmygroup u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level\n",
		"# events/user_events/MyProvider_L4K1Gmygroup/format\n",
		"\tfield:u8 level;\toffset:15;\tsize:1;\tsigned:0;\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// A payload is decoded as the event it is.
	var b eventheader.Builder
	b.Reset("MyEvent", eventheader.Header{Level: 4})
	b.AddUint32("status", 200, eventheader.FormatDefault, 0)
	b.AddString("path", "/index.html", eventheader.FormatDefault, 0)
	ev, err := b.AppendEvent(nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err = run("describe", "MyProvider_L4K1", "--payload", hex.EncodeToString(ev))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"n": "MyProvider:MyEvent", "status": 200, "path": "/index.html"`; !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
		t.Errorf("the payload's event lacks %s:\n%s", want, out)
	}
	out, _ = run("describe", "MyProvider_L4K1", "--payload", "0102")
	if !strings.Contains(out, "eventheader:") {
		t.Errorf("a bad payload is not explained:\n%s", out)
	}

	// A plain command is still one; --eventheader insists on a name.
	if out, _ := run("describe", "x_L1K1 u32 a"); strings.Contains(out, "EventHeader") {
		t.Errorf("a command with fields described as EventHeader:\n%s", out)
	}
	_, err = run("describe", "--eventheader", "nounderscore")
	if err == nil || !strings.Contains(err.Error(), `describe "nounderscore": invalid argument (EINVAL): not an EventHeader tracepoint name`) {
		t.Errorf("describe --eventheader of a bad name: %v", err)
	}
}

// emit --eventheader registers the tracepoint and writes one event, which
// decodes back to the fields given. It runs in-process: the test holds the
// tracepoint enabled with a session of the same subsystem.
func TestEmitEventHeader(t *testing.T) {
	const tpName = "UetraceTest_L4K1"
	tp, err := eventheader.ParseTracepointName(tpName)
	if err != nil {
		t.Fatal(err)
	}
	f, err := userevents.Open(inprocess().Options())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Register(tp.Command(), 0); err != nil {
		t.Fatal(err)
	}
	sys := inprocess().Subsystem()
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if err := ss.Attach(sys.Lookup("user_events", tpName)); err != nil {
		t.Fatal(err)
	}

	out, err := run("--backend", "inprocess", "emit", "--eventheader", tpName, "--name", "MyEvent", "--id", "7", "--opcode", "1",
		"--field", "status=u32:200", "--field", "path=string:/index.html", "--field", "delta=s64:-5",
		"--field", "ok=bool:true", "--field", "err=errno:2", "--field", "addr=ipv4:192.0.2.1", "--field", "raw=binary:0aff")
	if err != nil {
		t.Fatalf("emit: %v\n%s", err, out)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	recs, _ := ss.Read(done, make([]byte, 1<<16), nil)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	payload := recs[0].Raw[8:]
	ev, err := eventheader.Decode(tpName, payload)
	if err != nil {
		t.Fatal(err)
	}
	js, err := ev.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(string(js)), " ")
	for _, want := range []string{
		`"n": "UetraceTest:MyEvent"`, `"status": 200`, `"path": "/index.html"`, `"delta": -5`,
		`"ok": true`, `"err": "ENOENT(2)"`, `"addr": "192.0.2.1"`, `"raw": "0a ff"`, `"id": 7`, `"level": 4`, `"opcode": 1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the event lacks %s:\n%s", want, got)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"emit", "--eventheader", tpName, "--field", "a=u32:1"}, "an EventHeader event needs its name: --name"},
		{[]string{"emit", "--eventheader", tpName, "--name", "E", "--field", "a=u8:256"}, `--field "a=u8:256": u8 takes an unsigned 8-bit integer`},
		{[]string{"emit", "--eventheader", tpName, "--name", "E", "--field", "a"}, `--field "a": an EventHeader field is name=type:value`},
		{[]string{"emit", "x u32 a", "--name", "E"}, "--name, --id, --version and --opcode are for EventHeader events: add --eventheader"},
	} {
		_, err := run(append([]string{"--backend", "inprocess"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), "invalid argument (EINVAL)") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want EINVAL saying %q", c.args, err, c.want)
		}
	}
}

// emit --eventheader through the daemon, from the binary: the record's
// header is in the trace, and the daemon's session receives the event,
// which decodes to the fields given.
func TestEmitEventHeaderDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	const tpName = "CliProvider_L5K2"
	tp, err := eventheader.ParseTracepointName(tpName)
	if err != nil {
		t.Fatal(err)
	}
	holder, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", tp.Command())
	defer holder.Process.Kill()
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })

	c, err := client.Dial(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ss, err := c.NewSession(client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Attach("user_events:"+tpName, false); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, sock, "emit", "--eventheader", tpName, "--name", "Started", "--field", "pid=pid:42", "--field", "msg=string:hello")
	var recs []client.Record
	testutil.Wait(t, "the event to reach the session", func() bool {
		got, _, _, err := ss.Poll(nil)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
		return len(recs) > 0
	})
	ev, err := eventheader.Decode(tpName, recs[0].Raw[8:])
	if err != nil {
		t.Fatal(err)
	}
	js, _ := ev.AppendJSON(nil)
	if want := `"n": "CliProvider:Started", "pid": 42, "msg": "hello", "meta": { "level": 5, "keyword": "0x2" }`; !strings.Contains(strings.Join(strings.Fields(string(js)), " "), want) {
		t.Errorf("the event is %s, want %s", js, want)
	}
}
