package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
)

// TestKernelShark opens, in Debian's KernelShark under Xvfb, a trace.dat
// that Debian's trace-cmd recorded of uetrace's events under uetrace run,
// waits until its window names the file (loaded), and saves a screenshot
// (its path is logged; it is not kept with the sources). KernelShark keeps
// an event's id in an int16_t: the tree's ids must be below 32768 for it
// to show the event's name and fields (subsys's package doc).
func TestKernelShark(t *testing.T) {
	needFUSE(t)
	tc := traceCmd(t)
	var tools []string
	for _, tool := range []string{"kernelshark", "Xvfb", "xwininfo"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s (Debian's kernelshark, xvfb and x11-utils; .ci/run installs them)", tool)
		}
		tools = append(tools, p)
	}
	kernelshark, xvfb, xwininfo := tools[0], tools[1], tools[2]

	// A directory nobody may use: KernelShark runs as nobody (as root it
	// asks first whether to go on), and writes its settings in $HOME.
	dir, err := os.MkdirTemp("", "uetrace-kernelshark-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dat := filepath.Join(dir, "trace.dat")
	helper := fmt.Sprintf(`%s -test.run='^TestHelperTraceCmdWrites$'`, os.Args[0])
	out, code := runLong(t, []string{helperEnv + "=tracecmd-writes", "UETRACE_TEST_RECORDS=500", "UETRACE_TEST_RECORDER=1"}, "run", "--private", "--", "sh", "-c",
		fmt.Sprintf("echo 'u:%s' >> /sys/kernel/tracing/dynamic_events && echo 'u:%s' >> /sys/kernel/tracing/dynamic_events && %s record -q -o %s -e user_events %s",
			tcHello, tcOther, tc, dat, helper))
	if code != 0 {
		t.Fatalf("trace-cmd record under uetrace run: exit %d\n%s", code, out)
	}
	for _, p := range []string{dir, dat} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-30*time.Second))
	}
	defer cancel()
	// Xvfb picks a free display and says which (-displayfd), and keeps
	// its screen in fb/Xvfb_screen0, an XWD image (-fbdir).
	fb := filepath.Join(dir, "fb")
	if err := os.Mkdir(fb, 0o700); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	x := exec.CommandContext(ctx, xvfb, "-displayfd", "3", "-screen", "0", "1024x640x24", "-fbdir", fb, "-nolisten", "tcp")
	x.ExtraFiles = []*os.File{w}
	var xlog bytes.Buffer
	x.Stdout, x.Stderr = &xlog, &xlog
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { x.Process.Kill(); x.Wait() })
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if err != nil {
		t.Fatalf("Xvfb said no display: %v\n%s", err, xlog.String())
	}
	display := ":" + strings.TrimSpace(line)

	ks := exec.CommandContext(ctx, kernelshark, dat)
	ks.Env = append(os.Environ(), "DISPLAY="+display, "HOME="+dir, "XDG_RUNTIME_DIR="+dir)
	ks.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	ks.Dir = dir
	var kslog testutil.Buffer
	ks.Stdout, ks.Stderr = &kslog, &kslog
	if err := ks.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once KernelShark is waited for, with its error in
	// waitErr: the wait below and the cleanup both look.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = ks.Wait(); close(exited) }()
	t.Cleanup(func() { ks.Process.Kill(); <-exited })

	// Loaded: its main window is titled with the file.
	title := "Kernel Shark (" + dat + ")"
	testutil.Wait(t, "KernelShark's window to name "+dat, func() bool {
		select {
		case <-exited:
			t.Fatalf("KernelShark exited: %v\n%s", waitErr, kslog.String())
		default:
		}
		tree, _ := exec.CommandContext(ctx, xwininfo, "-display", display, "-root", "-tree").Output()
		return bytes.Contains(tree, []byte(`"`+title+`"`))
	})
	// Painted: the screen no longer changes between two looks.
	var shot image.Image
	var last []byte
	testutil.Wait(t, "KernelShark's window to be painted", func() bool {
		b, err := os.ReadFile(filepath.Join(fb, "Xvfb_screen0"))
		if err != nil {
			t.Fatal(err)
		}
		same := bytes.Equal(b, last)
		last = b
		if !same {
			time.Sleep(200 * time.Millisecond) // between two looks: what "no longer changes" means
			return false
		}
		shot, err = decodeXWD(b)
		if err != nil {
			t.Fatalf("Xvfb's screen: %v", err)
		}
		return true
	})
	if n := colours(shot); n < 4 {
		t.Errorf("the screenshot has %d colours: KernelShark drew nothing", n)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("uetrace-kernelshark-%d.png", time.Now().Unix()))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, shot); err != nil {
		t.Fatal(err)
	}
	t.Logf("KernelShark with %s recorded by trace-cmd under uetrace run: screenshot %s", dat, path)
	if s := kslog.String(); strings.Contains(strings.ToLower(s), "error") {
		t.Errorf("KernelShark said:\n%s", s)
	}
}

// colours counts the distinct colours of img, up to 16.
func colours(img image.Image) int {
	seen := map[color.RGBA]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y && len(seen) < 16; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 255}] = true
		}
	}
	return len(seen)
}

// decodeXWD decodes an X Window Dump as Xvfb's -fbdir keeps its screen
// (X11's XWDFile.h, version 7): a header of 25 big-endian 32-bit fields
// and the window's name, a color map of 12-byte entries, then the rows of
// a ZPixmap of 24 or 32 bits a pixel whose red, green and blue masks say
// where each is.
func decodeXWD(b []byte) (image.Image, error) {
	if len(b) < 100 {
		return nil, errors.New("xwd: shorter than its header")
	}
	h := make([]uint32, 25)
	for i := range h {
		h[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	headerSize, version, format, width, height := h[0], h[1], h[2], h[4], h[5]
	byteOrder, bpp, stride := h[7], h[11], h[12]
	masks := [3]uint32{h[14], h[15], h[16]}
	ncolors := h[19]
	if version != 7 || format != 2 || (bpp != 24 && bpp != 32) || width == 0 || height == 0 || width > 1<<14 || height > 1<<14 {
		return nil, fmt.Errorf("xwd: version %d, format %d, %d bits a pixel, %dx%d: not a 24- or 32-bit ZPixmap of version 7", version, format, bpp, width, height)
	}
	off := uint64(headerSize) + 12*uint64(ncolors)
	if uint64(stride) < uint64(width)*uint64(bpp/8) || off+uint64(stride)*uint64(height) > uint64(len(b)) {
		return nil, fmt.Errorf("xwd: %dx%d pixels of %d bytes a row from byte %d do not fit in %d bytes", width, height, stride, off, len(b))
	}
	img := image.NewRGBA(image.Rect(0, 0, int(width), int(height)))
	chan8 := func(p, mask uint32) uint8 {
		if mask == 0 {
			return 0
		}
		for mask&1 == 0 {
			mask >>= 1
			p >>= 1
		}
		return uint8(p & mask * 255 / mask)
	}
	for y := range int(height) {
		row := b[off+uint64(y)*uint64(stride):]
		for x := range int(width) {
			var p uint32
			for i := range int(bpp / 8) {
				v := uint32(row[x*int(bpp/8)+i])
				if byteOrder == 0 { // LSBFirst
					p |= v << (8 * i)
				} else {
					p = p<<8 | v
				}
			}
			img.SetRGBA(x, y, color.RGBA{chan8(p, masks[0]), chan8(p, masks[1]), chan8(p, masks[2]), 255})
		}
	}
	return img, nil
}

// FuzzDecodeXWD: any bytes decode to an image of their size or an error,
// never a panic.
func FuzzDecodeXWD(f *testing.F) {
	hdr := make([]byte, 100)
	for i, v := range []uint32{100, 7, 2, 24, 2, 2, 0, 0, 32, 0, 32, 32, 8, 4, 0xff0000, 0xff00, 0xff, 8, 0, 0} {
		binary.BigEndian.PutUint32(hdr[4*i:], v)
	}
	f.Add(append(hdr, make([]byte, 16)...))
	f.Add(hdr)
	f.Add([]byte(strconv.Itoa(7)))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := decodeXWD(b)
		if err == nil && (img.Bounds().Dx() == 0 || img.Bounds().Dy() == 0) {
			t.Fatal("an empty image without an error")
		}
	})
}
