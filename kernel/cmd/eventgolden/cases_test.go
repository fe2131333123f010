package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestParseCases(t *testing.T) {
	in := `# comment

case "__t u32 a"
write 01000000
write 41 00*3
write -
case "__t\tx " flags=3
match "__t u32 a" "__t u32  a" flags=2
match "a" "b" flags=0 flags2=1
delete "x u32 a" "!u:x u32 a;u32 b"
`
	ds, err := parseCases(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 5 {
		t.Fatalf("got %d directives, want 5", len(ds))
	}
	c := ds[0]
	if c.kind != "case" || c.a != "__t u32 a" || c.flags != 0 || c.line != 3 || len(c.writes) != 3 {
		t.Errorf("case 0 = %+v", c)
	}
	if !bytes.Equal(c.writes[0], []byte{1, 0, 0, 0}) || !bytes.Equal(c.writes[1], []byte{0x41, 0, 0, 0}) || len(c.writes[2]) != 0 {
		t.Errorf("writes = %x", c.writes)
	}
	if ds[1].a != "__t\tx " || ds[1].flags != 3 {
		t.Errorf("case 1 = %+v", ds[1])
	}
	if m := ds[2]; m.kind != "match" || m.b != "__t u32  a" || m.flags != 2 || m.flags2 != 2 {
		t.Errorf("match 0 = %+v", m)
	}
	if m := ds[3]; m.flags != 0 || m.flags2 != 1 {
		t.Errorf("match 1 = %+v", m)
	}
	if d := ds[4]; d.kind != "delete" || d.a != "x u32 a" || d.b != "!u:x u32 a;u32 b" {
		t.Errorf("delete = %+v", d)
	}
}

func TestParseCasesErrors(t *testing.T) {
	for _, in := range []string{
		`write 00`,
		`case "a"` + "\nwrite",
		`case "a"` + "\nwrite 0",
		`case "a"` + "\nwrite 00*x",
		`case a`,
		`case "a" flags=x`,
		`case "a" flags2=1`,
		`case "a" extra`,
		`match "a"`,
		`delete "a" "b" flags=1`,
		`case "\xff"`,
		`frob "a"`,
	} {
		if _, err := parseCases(strings.NewReader(in)); err == nil {
			t.Errorf("parseCases(%q) succeeded", in)
		}
	}
}

// The committed case file must parse.
func TestCaseFile(t *testing.T) {
	f, err := os.Open("../../../eventdef/testdata/kernel-cases.txt")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	ds, err := parseCases(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) == 0 {
		t.Fatal("no directives")
	}
}
