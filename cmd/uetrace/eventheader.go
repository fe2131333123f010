package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/userevents"
)

// EventHeader tracepoints in describe and emit: "<provider>_L<level>K<keyword>[options]",
// one per provider, level and keyword, every event of them self-describing.

var levelNames = [...]string{1: "critical error", 2: "error", 3: "warning", 4: "information", 5: "verbose"}

func levelName(l eventheader.Level) string {
	if int(l) < len(levelNames) && levelNames[l] != "" {
		return levelNames[l]
	}
	return "no defined meaning"
}

// ehName parses an EventHeader tracepoint name; op names the command in
// the error, EINVAL with the format's rule.
func ehName(op, name string) (eventheader.TracepointName, error) {
	tp, err := eventheader.ParseTracepointName(name)
	if err == nil {
		err = tp.Validate()
	}
	if err != nil {
		return tp, &userevents.Error{Op: op, Input: name, Errno: unix.EINVAL,
			Reason: fmt.Sprintf("not an EventHeader tracepoint name, <provider>_L<level>K<keyword>[G<group>]: %s", strings.TrimPrefix(err.Error(), "eventheader: "))}
	}
	return tp, nil
}

// looksEventHeader says whether describe's argument is an EventHeader
// tracepoint name rather than a command: one word that parses as one.
func looksEventHeader(arg string) bool {
	if strings.ContainsAny(arg, " \t;") {
		return false
	}
	tp, err := eventheader.ParseTracepointName(arg)
	return err == nil && tp.Validate() == nil
}

// describeEventHeader explains an EventHeader tracepoint and returns the
// command it is registered with, for the format file that follows.
func describeEventHeader(out io.Writer, tp eventheader.TracepointName) string {
	group := tp.Group()
	if group == "" {
		group = "(none)"
	}
	fmt.Fprintf(out, "# EventHeader tracepoint %s\n", tp)
	fmt.Fprintf(out, "provider: %s\n", tp.Provider)
	fmt.Fprintf(out, "level:    %d (%s)\n", tp.Level, levelName(tp.Level))
	fmt.Fprintf(out, "keyword:  0x%x\n", tp.Keyword)
	fmt.Fprintf(out, "group:    %s\n", group)
	fmt.Fprintf(out, "register: %s\n", tp.Command())
	fmt.Fprintf(out, "Every event of provider %s at level %d with keyword 0x%x is written to this\n"+
		"tracepoint: the 8-byte header (the fields below), extension blocks (the event's name,\n"+
		"its fields' names and types), then the values; describe --payload decodes one.\n\n", tp.Provider, tp.Level, tp.Keyword)
	return tp.Command()
}

// describePayloadEventHeader prints a hex payload as the EventHeader event it
// is, in JSON, or why it is not one.
func describePayloadEventHeader(out io.Writer, tp eventheader.TracepointName, p string, payload []byte) {
	ev, err := eventheader.Decode(tp.String(), payload)
	if err != nil {
		fmt.Fprintf(out, "\n# event (write %s)\n%v\n", p, err)
		return
	}
	js, err := ev.AppendJSON(nil)
	if err != nil {
		fmt.Fprintf(out, "\n# event (write %s)\n%v\n", p, err)
		return
	}
	fmt.Fprintf(out, "\n# event (write %s)\n%s\n", p, js)
}

// ehHeader is what emit --eventheader puts in the header besides the level.
type ehHeader struct {
	name    string
	id      uint16
	version uint8
	opcode  uint8
}

// ehFieldTypes are emit's --field types for EventHeader events, with their
// help text.
const ehFieldTypes = "u8 u16 u32 u64 s8 s16 s32 s64 x32 x64 (hex) f32 f64 bool string zstring binary (hex bytes) errno pid port ipv4 ipv6 uuid"

// emitEventHeader registers the tracepoint and, when it is enabled, writes
// one event of the header and fields given.
func emitEventHeader(cmd *cobra.Command, g *globals, name string, h ehHeader, fields []string) error {
	tp, err := ehName("emit", name)
	if err != nil {
		return err
	}
	if h.name == "" {
		return &userevents.Error{Op: "emit", Input: name, Errno: unix.EINVAL, Reason: "an EventHeader event needs its name: --name"}
	}
	var b eventheader.Builder
	b.Reset(h.name, eventheader.Header{ID: h.id, Version: h.version, Opcode: eventheader.Opcode(h.opcode), Level: tp.Level})
	for _, kv := range fields {
		if err := addEHField(&b, kv); err != nil {
			return &userevents.Error{Op: "emit", Input: name, Errno: unix.EINVAL, Reason: reason(err)}
		}
	}
	data, err := b.AppendEvent(nil)
	if err != nil {
		return &userevents.Error{Op: "emit", Input: name, Errno: unix.EINVAL, Reason: strings.TrimPrefix(err.Error(), "eventheader: ")}
	}
	existed := existence(g, eventdef.System, tp.String())
	f, err := g.file()
	if err != nil {
		return err
	}
	defer f.Close()
	ev, err := f.Register(tp.Command(), 0)
	if err != nil {
		return asOp(err, "emit", "", name)
	}
	if !ev.Enabled() {
		emitNotEnabled(cmd, tp.String(), tp.Command(), existed)
		return nil
	}
	return asOp(ev.Write(data), "emit", "", name)
}

// addEHField adds "name=type:value" to b.
func addEHField(b *eventheader.Builder, kv string) error {
	name, tv, ok := strings.Cut(kv, "=")
	typ, v, ok2 := strings.Cut(tv, ":")
	if !ok || !ok2 || name == "" {
		return fmt.Errorf("--field %q: an EventHeader field is name=type:value, the type one of %s", kv, ehFieldTypes)
	}
	bad := func(what string) error {
		return fmt.Errorf("--field %q: %s takes %s", kv, typ, what)
	}
	uint := func(bits int) (uint64, error) {
		n, err := strconv.ParseUint(v, 0, bits)
		if err != nil {
			return 0, bad(fmt.Sprintf("an unsigned %d-bit integer (42, 0x2a)", bits))
		}
		return n, nil
	}
	sint := func(bits int) (int64, error) {
		n, err := strconv.ParseInt(v, 0, bits)
		if err != nil {
			return 0, bad(fmt.Sprintf("a signed %d-bit integer (-42, 0x2a)", bits))
		}
		return n, nil
	}
	var err error
	switch typ {
	case "u8", "u16", "u32", "u64", "x32", "x64", "pid", "port":
		bits := map[string]int{"u8": 8, "u16": 16, "u32": 32, "u64": 64, "x32": 32, "x64": 64, "pid": 32, "port": 16}[typ]
		var n uint64
		if n, err = uint(bits); err != nil {
			return err
		}
		switch typ {
		case "u8":
			b.AddUint8(name, uint8(n), eventheader.FormatDefault, 0)
		case "u16":
			b.AddUint16(name, uint16(n), eventheader.FormatDefault, 0)
		case "u32":
			b.AddUint32(name, uint32(n), eventheader.FormatDefault, 0)
		case "u64":
			b.AddUint64(name, n, eventheader.FormatDefault, 0)
		case "x32":
			b.AddUint32(name, uint32(n), eventheader.FormatHexInt, 0)
		case "x64":
			b.AddUint64(name, n, eventheader.FormatHexInt, 0)
		case "pid":
			b.AddUint32(name, uint32(n), eventheader.FormatPid, 0)
		case "port":
			b.AddPort(name, uint16(n), 0)
		}
	case "s8", "s16", "s32", "s64", "errno":
		bits := map[string]int{"s8": 8, "s16": 16, "s32": 32, "s64": 64, "errno": 32}[typ]
		var n int64
		if n, err = sint(bits); err != nil {
			return err
		}
		switch typ {
		case "s8":
			b.AddUint8(name, uint8(n), eventheader.FormatSignedInt, 0)
		case "s16":
			b.AddUint16(name, uint16(n), eventheader.FormatSignedInt, 0)
		case "s32":
			b.AddInt32(name, int32(n), 0)
		case "s64":
			b.AddInt64(name, n, 0)
		case "errno":
			b.AddUint32(name, uint32(n), eventheader.FormatErrno, 0)
		}
	case "f32", "f64":
		bits := 32
		if typ == "f64" {
			bits = 64
		}
		x, err := strconv.ParseFloat(v, bits)
		if err != nil || math.IsInf(x, 0) && !strings.Contains(strings.ToLower(v), "inf") {
			return bad("a number (1.5, -2e3)")
		}
		if bits == 32 {
			b.AddFloat32(name, float32(x), 0)
		} else {
			b.AddFloat64(name, x, 0)
		}
	case "bool":
		t, err := strconv.ParseBool(v)
		if err != nil {
			return bad("true or false")
		}
		b.AddBool(name, t, 0)
	case "string":
		b.AddString(name, v, eventheader.FormatDefault, 0)
	case "zstring":
		if strings.IndexByte(v, 0) >= 0 {
			return bad("text without NUL")
		}
		b.AddZString(name, v, eventheader.FormatDefault, 0)
	case "binary":
		p, err := hex.DecodeString(strings.ReplaceAll(v, " ", ""))
		if err != nil {
			return bad("hex bytes")
		}
		b.AddBinary(name, p, eventheader.FormatDefault, 0)
	case "ipv4", "ipv6":
		a, err := netip.ParseAddr(v)
		if err != nil || typ == "ipv4" && !a.Is4() || typ == "ipv6" && a.Is4() {
			return bad("an " + map[string]string{"ipv4": "IPv4 address (192.0.2.1)", "ipv6": "IPv6 address (2001:db8::1)"}[typ])
		}
		if typ == "ipv4" {
			b.AddIPv4(name, a.As4(), 0)
		} else {
			b.AddIPv6(name, a.As16(), 0)
		}
	case "uuid":
		p, err := hex.DecodeString(strings.ReplaceAll(v, "-", ""))
		if err != nil || len(p) != 16 {
			return bad("a UUID (3f2504e0-4f89-11d3-9a0c-0305e82c3301)")
		}
		b.AddUUID(name, [16]byte(p), 0)
	default:
		return fmt.Errorf("--field %q: no EventHeader type %q; the types are %s", kv, typ, ehFieldTypes)
	}
	if err := b.Err(); err != nil {
		return fmt.Errorf("--field %q: %s", kv, strings.TrimPrefix(err.Error(), "eventheader: "))
	}
	return nil
}
