package fuse

import (
	"encoding/binary"
	"errors"
	"testing"
)

// req is a request as the kernel writes it: the in header, then body.
func req(op uint32, unique, node uint64, body []byte) []byte {
	b := make([]byte, inHeaderSize, inHeaderSize+len(body))
	binary.LittleEndian.PutUint32(b[0:], uint32(inHeaderSize+len(body)))
	binary.LittleEndian.PutUint32(b[4:], op)
	binary.LittleEndian.PutUint64(b[8:], unique)
	binary.LittleEndian.PutUint64(b[16:], node)
	binary.LittleEndian.PutUint32(b[24:], 1000) // uid
	binary.LittleEndian.PutUint32(b[28:], 100)  // gid
	binary.LittleEndian.PutUint32(b[32:], 4242) // pid
	return append(b, body...)
}

// fields builds a body of little-endian values: uint32, uint64, string
// (with its NUL), []byte.
func fields(vs ...any) []byte {
	var b []byte
	for _, v := range vs {
		switch v := v.(type) {
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, v)
		case string:
			b = append(append(b, v...), 0)
		case []byte:
			b = append(b, v...)
		}
	}
	return b
}

// seedRequests has a well-formed request of every opcode.
func seedRequests() [][]byte {
	zero := func(n int) []byte { return make([]byte, n) }
	rw := func(fh, off uint64, size, flags uint32) []byte {
		return fields(fh, off, size, uint32(0), uint64(0), flags, uint32(0))
	}
	reqs := [][]byte{
		req(opLookup, 2, 1, fields("hello")),
		req(opForget, 4, 5, fields(uint64(3))),
		req(opBatchForget, 6, 0, fields(uint32(2), uint32(0), uint64(5), uint64(1), uint64(6), uint64(2))),
		req(opGetattr, 8, 5, fields(uint32(1), uint32(0), uint64(9))),
		req(opSetattr, 10, 5, append(fields(uint32(fattrSize), uint32(0), uint64(9), uint64(0)), zero(64)...)),
		req(opOpen, 12, 5, fields(uint32(0o1001), uint32(0))),
		req(opRead, 14, 5, rw(9, 100, 4096, 0)),
		req(opWrite, 16, 5, append(rw(9, 7, 3, 0o2001), "abc"...)),
		req(opStatfs, 18, 1, nil),
		req(opRelease, 20, 5, fields(uint64(9), uint32(0), uint32(0), uint64(0))),
		req(opFlush, 22, 5, fields(uint64(9), uint32(0), uint32(0), uint64(0))),
		req(opInit, 24, 0, append(fields(uint32(7), uint32(45), uint32(131072), uint32(0x73fffffb), uint32(0)), zero(44)...)),
		req(opOpendir, 26, 1, fields(uint32(0), uint32(0))),
		req(opReaddir, 28, 1, rw(10, 0, 4096, 0)),
		req(opReleasedir, 30, 1, fields(uint64(10), uint32(0), uint32(0), uint64(0))),
		req(opAccess, 32, 1, fields(uint32(4), uint32(0))),
		req(opInterrupt, 35, 0, fields(uint64(14))),
		req(opDestroy, 36, 0, nil),
		req(opIoctl, 38, 5, fields(uint64(9), uint32(0), uint32(0xc0082a00), uint64(0x7ffd0000), uint32(8), uint32(8), uint64(0x1122334455667788))),
		req(opPoll, 40, 5, fields(uint64(9), uint64(77), uint32(pollScheduleNotify), uint32(1))),
		req(opGetxattr, 42, 5, fields(uint32(0), uint32(0), "security.selinux")),
		req(opListxattr, 44, 5, fields(uint32(0), uint32(0))),
		req(opNotifyReply, 46, 5, zero(40)),
	}
	// Everything else, with a plausible body.
	for op := uint32(1); op <= 51; op++ {
		reqs = append(reqs, req(op, 100+uint64(op)*2, 5, zero(40)))
	}
	return append(reqs, req(4096, 300, 0, zero(16)))
}

func TestDecodeSeeds(t *testing.T) {
	for _, b := range seedRequests()[:23] {
		m, err := decode(b)
		if err != nil {
			t.Errorf("%s: %v", opName(le.Uint32(b[4:])), err)
			continue
		}
		if m.uid != 1000 || m.gid != 100 || m.pid != 4242 {
			t.Errorf("%s: header %+v", opName(m.op), m)
		}
		switch m.op {
		case opLookup:
			if m.name != "hello" || m.node != 1 {
				t.Errorf("LOOKUP %+v", m)
			}
		case opBatchForget:
			if len(m.forgets) != 2 || m.forgets[1] != (forgetOne{6, 2}) {
				t.Errorf("BATCH_FORGET %+v", m.forgets)
			}
		case opWrite:
			if string(m.data) != "abc" || m.offset != 7 || m.fh != 9 || m.flags != 0o2001 {
				t.Errorf("WRITE %+v", m)
			}
		case opIoctl:
			if m.cmd != 0xc0082a00 || m.arg != 0x7ffd0000 || len(m.data) != 8 || m.outSize != 8 {
				t.Errorf("IOCTL %+v", m)
			}
		case opPoll:
			if m.kh != 77 || m.events != 1 || m.flags != pollScheduleNotify {
				t.Errorf("POLL %+v", m)
			}
		case opInit:
			if m.major != 7 || m.minor != 45 || m.maxReadahead != 131072 {
				t.Errorf("INIT %+v", m)
			}
		case opInterrupt:
			if m.target != 14 {
				t.Errorf("INTERRUPT %+v", m)
			}
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := req(opWrite, 16, 5, append(fields(uint64(9), uint64(0), uint32(3), uint32(0), uint64(0), uint32(0), uint32(0)), "abc"...))
	if _, err := decode(good[:inHeaderSize-1]); !errors.Is(err, errBadHeader) {
		t.Errorf("short header: %v", err)
	}
	short := append([]byte(nil), good[:len(good)-1]...)
	if _, err := decode(short); !errors.Is(err, errBadHeader) {
		t.Errorf("length field disagreeing with the read: %v", err)
	}
	le.PutUint32(short, uint32(len(short)))
	if m, err := decode(short); !errors.Is(err, errMalformed) || m.unique != 16 {
		t.Errorf("WRITE with less data than its size: %v (unique %d)", err, m.unique)
	}
	noNUL := req(opLookup, 2, 1, []byte("abc"))
	if _, err := decode(noNUL); !errors.Is(err, errMalformed) {
		t.Errorf("LOOKUP without NUL: %v", err)
	}
	huge := req(opBatchForget, 6, 0, fields(uint32(1<<31), uint32(0)))
	if _, err := decode(huge); !errors.Is(err, errMalformed) {
		t.Errorf("BATCH_FORGET counting more than it has: %v", err)
	}
	ext := req(opLookup, 2, 1, fields("x"))
	le.PutUint16(ext[36:], 100) // extensions longer than the body
	if _, err := decode(ext); !errors.Is(err, errMalformed) {
		t.Errorf("extensions past the end: %v", err)
	}
}

// FuzzDecode: the decoder never panics, and what it accepts is consistent.
func FuzzDecode(f *testing.F) {
	for _, b := range seedRequests() {
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 4 {
			le.PutUint32(b, uint32(len(b))) // mostly past the length check
		}
		m, err := decode(b)
		if err != nil {
			return
		}
		switch m.op {
		case opWrite:
			if uint32(len(m.data)) != m.size {
				t.Fatalf("WRITE of %d bytes says %d", len(m.data), m.size)
			}
		case opIoctl:
			if uint32(len(m.data)) != m.inSize {
				t.Fatalf("IOCTL in of %d bytes says %d", len(m.data), m.inSize)
			}
		case opBatchForget:
			if 8+16*len(m.forgets) > len(b)-inHeaderSize {
				t.Fatalf("BATCH_FORGET of %d from %d bytes", len(m.forgets), len(b))
			}
		}
	})
}

func TestPackDirents(t *testing.T) {
	ents := []dirent{{".", 4, 1}, {"..", 4, 1}, {"abcdefghi", 8, 7}}
	b := packDirents(ents, 0, 4096)
	if len(b) != 32+32+40 {
		t.Fatalf("%d bytes", len(b))
	}
	if le.Uint64(b[64:]) != 7 || le.Uint64(b[72:]) != 3 || le.Uint32(b[80:]) != 9 || le.Uint32(b[84:]) != 8 || string(b[88:97]) != "abcdefghi" {
		t.Errorf("third record % x", b[64:])
	}
	if b := packDirents(ents, 1, 70); len(b) != 32 {
		t.Errorf("from offset 1 in 70 bytes: %d bytes, want the one record that fits", len(b))
	}
	if b := packDirents(ents, 3, 4096); len(b) != 0 {
		t.Errorf("past the end: %d bytes", len(b))
	}
}

func BenchmarkDecodeWrite(b *testing.B) {
	msg := req(opWrite, 16, 5, append(fields(uint64(9), uint64(0), uint32(4096), uint32(0), uint64(0), uint32(0), uint32(0)), make([]byte, 4096)...))
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeLookup(b *testing.B) {
	msg := req(opLookup, 2, 1, fields("user_events_data"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}
