package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/userevents"
)

func init() { runtime.LockOSThread() }

const data = "/sys/kernel/tracing/user_events_data"

var word = make([]uint32, 64)

func openData() int {
	fd, err := unix.Open(data, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		panic(err)
	}
	return fd
}

func reg(fd int, slot int, cmd string, flags uint16) error {
	r := abi.UserReg{Size: abi.UserRegSize, EnableSize: 4, Flags: flags, EnableAddr: uint64(uintptr(unsafe.Pointer(&word[slot])))}
	return abi.RegisterName(fd, &r, cmd)
}
func unreg(fd int, slot int) error {
	u := abi.UserUnreg{Size: abi.UserUnregSize, DisableAddr: uint64(uintptr(unsafe.Pointer(&word[slot])))}
	return abi.Unregister(fd, &u)
}

// pollDel: delete by name until not EBUSY or timeout; report first error, count, time.
func pollDel(fd int, name string, limit time.Duration) string {
	t0 := time.Now()
	first := abi.Delete(fd, name)
	n := 0
	err := first
	for err == unix.EBUSY && time.Since(t0) < limit {
		time.Sleep(100 * time.Microsecond)
		err = abi.Delete(fd, name)
		n++
	}
	return fmt.Sprintf("first=%v final=%v after %d retries, %v", first, err, n, time.Since(t0))
}

func inStatus(name string) bool {
	b, _ := os.ReadFile("/sys/kernel/tracing/user_events_status")
	for _, l := range strings.Split(string(b), "\n") {
		if l == name || strings.HasPrefix(l, name+" ") {
			return true
		}
	}
	return false
}

func main() {
	u, _ := os.ReadFile("/proc/version")
	fmt.Print(string(u))
	P := uint16(abi.RegPersist)

	// A: persist, unreg, close, delete from a new fd (what TestPersist does).
	{
		fd := openData()
		fmt.Println("A reg:", reg(fd, 0, "pa u32 a", P), "unreg:", unreg(fd, 0))
		unix.Close(fd)
		fd2 := openData()
		fmt.Println("A delete after unreg+close:", pollDel(fd2, "pa", 2*time.Second))
		unix.Close(fd2)
	}
	// B: persist, unreg, fd still open: delete from same fd.
	{
		fd := openData()
		fmt.Println("B reg:", reg(fd, 0, "pb u32 a", P), "unreg:", unreg(fd, 0))
		time.Sleep(200 * time.Millisecond)
		fmt.Println("B delete, fd open, 200ms after unreg:", abi.Delete(fd, "pb"))
		unix.Close(fd)
		fd2 := openData()
		fmt.Println("B delete after close:", pollDel(fd2, "pb", 2*time.Second))
		unix.Close(fd2)
	}
	// C: persist, unreg, sleep 200ms, close, delete at once.
	{
		fd := openData()
		fmt.Println("C reg:", reg(fd, 0, "pc u32 a", P), "unreg:", unreg(fd, 0))
		time.Sleep(200 * time.Millisecond)
		unix.Close(fd)
		fd2 := openData()
		fmt.Println("C delete right after close (unreg 200ms earlier):", pollDel(fd2, "pc", 2*time.Second))
		unix.Close(fd2)
	}
	// D: persist, NO unreg, close: enabler keeps the ref.
	{
		fd := openData()
		fmt.Println("D reg:", reg(fd, 1, "pd u32 a", P))
		unix.Close(fd)
		fd2 := openData()
		fmt.Println("D delete, enabler still registered, fd closed:", pollDel(fd2, "pd", 300*time.Millisecond))
		// now unreg via fd2 (enablers are per-mm, any fd works)
		fmt.Println("D unreg via another fd:", unreg(fd2, 1))
		fmt.Println("D delete after that unreg:", pollDel(fd2, "pd", 2*time.Second))
		unix.Close(fd2)
	}
	// E: non-persistent, unreg, close: time until gone from status.
	{
		fd := openData()
		fmt.Println("E reg:", reg(fd, 2, "pe u32 a", 0), "unreg:", unreg(fd, 2))
		unix.Close(fd)
		t0 := time.Now()
		imm := inStatus("pe")
		for inStatus("pe") && time.Since(t0) < 2*time.Second {
			time.Sleep(100 * time.Microsecond)
		}
		fmt.Printf("E non-persist: in status right after close=%v, gone=%v after %v\n", imm, !inStatus("pe"), time.Since(t0))
	}
	// F: re-register with other fields right after unreg+close (non-persist).
	{
		fd := openData()
		fmt.Println("F reg:", reg(fd, 3, "pf u32 a", 0), "unreg:", unreg(fd, 3))
		unix.Close(fd)
		fd2 := openData()
		t0 := time.Now()
		first := reg(fd2, 3, "pf u64 b", 0)
		err := first
		n := 0
		for err == unix.EADDRINUSE && time.Since(t0) < 2*time.Second {
			time.Sleep(100 * time.Microsecond)
			err = reg(fd2, 3, "pf u64 b", 0)
			n++
		}
		fmt.Printf("F re-register other fields: first=%v final=%v after %d retries, %v\n", first, err, n, time.Since(t0))
		unreg(fd2, 3)
		unix.Close(fd2)
	}
	// G: exactly the test's sequence through the library.
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("pg%d", i)
		f, err := userevents.Open(userevents.Options{Backend: userevents.Kernel})
		if err != nil {
			panic(err)
		}
		ev, err := f.Register(name+" u32 a", userevents.Persist)
		if err != nil {
			panic(err)
		}
		fmt.Println("G ev.Close:", ev.Close(), "f.Close:", f.Close())
		f2, _ := userevents.Open(userevents.Options{Backend: userevents.Kernel})
		t0 := time.Now()
		first := f2.Delete(name)
		err = first
		n := 0
		for err != nil && time.Since(t0) < 2*time.Second {
			time.Sleep(100 * time.Microsecond)
			err = f2.Delete(name)
			n++
		}
		fmt.Printf("G library delete: first=%v final=%v after %d retries, %v\n", first, err, n, time.Since(t0))
		f2.Close()
	}
}
