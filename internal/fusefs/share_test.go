package fusefs

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/preload"
)

// shareBytes is struct uet_share as the library fills it in.
func shareBytes(ring, table, wake int32, id uint64) []byte {
	b := make([]byte, preload.ShareSize)
	ne := binary.NativeEndian
	ne.PutUint32(b[preload.ShareOffSize:], preload.ShareSize)
	ne.PutUint32(b[preload.ShareOffABI:], preload.ABIVersion)
	ne.PutUint32(b[preload.ShareOffSetFD:], uint32(ring))
	ne.PutUint32(b[preload.ShareOffTableFD:], uint32(table))
	ne.PutUint32(b[preload.ShareOffWakeFD:], uint32(wake))
	ne.PutUint64(b[preload.ShareOffFileID:], id)
	return b
}

func TestParseShare(t *testing.T) {
	ok := shareBytes(3, 4, 1000, 7)
	if fds, err := parseShare(ok, preload.ShareSize, 7); err != nil || fds != [3]int{3, 4, 1000} {
		t.Errorf("a good request: %v, %v", fds, err)
	}
	bad := map[string][]byte{
		"another file":    shareBytes(3, 4, 5, 8),
		"a negative fd":   shareBytes(-1, 4, 5, 7),
		"the same fd":     shareBytes(3, 3, 5, 7),
		"short":           ok[:preload.ShareSize-1],
		"flags":           func() []byte { b := shareBytes(3, 4, 5, 7); b[preload.ShareOffFlags] = 1; return b }(),
		"another version": func() []byte { b := shareBytes(3, 4, 5, 7); b[preload.ShareOffABI] = 1; return b }(), // a library of ABI 1: one ring
		"another size":    func() []byte { b := shareBytes(3, 4, 5, 7); b[preload.ShareOffSize] = 41; return b }(),
	}
	for name, b := range bad {
		if _, err := parseShare(b, preload.ShareSize, 7); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", name, err)
		}
	}
	if _, err := parseShare(ok, 0, 7); !errors.Is(err, unix.EINVAL) {
		t.Errorf("no room for the answer: %v", err)
	}
}

// FuzzParseShare: whatever the caller's bytes, parseShare answers EINVAL
// or three distinct descriptor numbers, never panics.
func FuzzParseShare(f *testing.F) {
	f.Add(shareBytes(3, 4, 1000, 7), uint32(preload.ShareSize), uint64(7))
	f.Add(shareBytes(3, 3, 5, 7), uint32(preload.ShareSize), uint64(7))
	f.Add([]byte{}, uint32(0), uint64(0))
	f.Fuzz(func(t *testing.T, in []byte, outSize uint32, id uint64) {
		fds, err := parseShare(in, outSize, id)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("error %v is not EINVAL", err)
			}
			return
		}
		if fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || fds[0] == fds[1] || fds[0] == fds[2] || fds[1] == fds[2] {
			t.Fatalf("accepted %v", fds)
		}
	})
}
