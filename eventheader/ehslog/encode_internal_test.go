package ehslog

import (
	"encoding/binary"
	"strings"
	"testing"
)

// Strings and binary values longer than a 16-bit count are cut, a string
// at a character's start. (Such events exceed what perf and ftrace take
// from user_events, so the read-back tests cannot see them.)
func TestCut(t *testing.T) {
	ascii := strings.Repeat("a", 70000)
	if got := cut(ascii); len(got) != 65535 {
		t.Errorf("ASCII cut to %d bytes, want 65535", len(got))
	}
	two := strings.Repeat("é", 40000) // 2 bytes each: 65535 falls inside one
	if got := cut(two); len(got) != 65534 || got != two[:65534] {
		t.Errorf("2-byte characters cut to %d bytes, want 65534", len(got))
	}
	if got := cut([]byte(two[:100])); len(got) != 100 {
		t.Errorf("a short value cut to %d", len(got))
	}
	p := appendCounted(nil, two)
	if n := binary.LittleEndian.Uint16(p); int(n) != len(p)-2 || n != 65534 {
		t.Errorf("counted string: count %d, %d bytes", n, len(p)-2)
	}
	var e encoder
	e.attrBytes("b", make([]byte, 70000))
	if n := binary.LittleEndian.Uint16(e.data); n != 65535 || len(e.data) != 65537 {
		t.Errorf("binary: count %d, %d bytes", n, len(e.data))
	}
}
