package preload

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// needCC skips a test without the C compiler the library is built with.
func needCC(t *testing.T) string {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the interposer is built for amd64 only, this is %s", runtime.GOARCH)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s): apt-get install gcc libc6-dev", cc)
	}
	return cc
}

// rebuild runs the generator into dir and returns the object's and the
// toolchain file's paths.
func rebuild(t *testing.T, dir string, extra ...string) (obj, tc string) {
	t.Helper()
	obj, tc = filepath.Join(dir, FileName), filepath.Join(dir, "toolchain")
	args := append([]string{"run", "./build", "-dir", ".", "-o", obj, "-toolchain", tc}, extra...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return obj, tc
}

// TestCommittedObject: the object embedded is what go generate builds from
// the source, byte for byte — where this machine's compiler and linker are
// the ones that built it; elsewhere the test says which differ and skips.
func TestCommittedObject(t *testing.T) {
	needCC(t)
	obj, tc := rebuild(t, t.TempDir())
	committed, err := os.ReadFile("libuetrace-preload_amd64.toolchain")
	if err != nil {
		t.Fatal(err)
	}
	here, err := os.ReadFile(tc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, here) {
		t.Skipf("the committed object was built by\n%swhich this machine's toolchain is not:\n%sthe bytes may differ; not compared", committed, here)
	}
	got, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Library) {
		t.Fatalf("the committed libuetrace-preload_amd64.so (%d bytes) is not what the source builds (%d bytes): run go generate ./internal/preload and commit the result", len(Library), len(got))
	}
}

// TestSymbols: the object exports the interposed calls and the counts,
// nothing else, and needs of glibc only what glibc 2.17 has — no malloc,
// no stdio, no symbol of a newer version.
func TestSymbols(t *testing.T) {
	if Library == nil {
		t.Skip("no interposer on " + runtime.GOARCH)
	}
	f, err := elf.NewFile(bytes.NewReader(Library))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var exported, imported []string
	for _, s := range syms {
		switch {
		case s.Section == elf.SHN_UNDEF && s.Name != "":
			imported = append(imported, s.Name+"@"+s.Version)
		case s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) == elf.STB_GLOBAL:
			exported = append(exported, s.Name)
		}
	}
	slices.Sort(exported)
	slices.Sort(imported)
	wantExported := []string{"close", "close_range", "closefrom", "dup", "dup2", "dup3", "fclose", "fcntl", "fcntl64",
		"mmap", "mmap64", "pwrite", "pwrite64", "pwritev", "pwritev2", "pwritev64", "pwritev64v2", "sigaction", "signal",
		"uetrace_preload_stats", "vfork", "write", "writev"}
	if !slices.Equal(exported, wantExported) {
		t.Errorf("exported %q, want %q", exported, wantExported)
	}
	allowed := map[string]bool{
		"__errno_location@GLIBC_2.2.5": true, "clock_gettime@GLIBC_2.17": true, "sched_getcpu@GLIBC_2.6": true,
		"dlsym@GLIBC_2.2.5": true, "getenv@GLIBC_2.2.5": true, "strtoull@GLIBC_2.2.5": true, "strcmp@GLIBC_2.2.5": true,
		"sysconf@GLIBC_2.2.5": true, "fileno@GLIBC_2.2.5": true, "sigaddset@GLIBC_2.2.5": true,
		"memcpy@GLIBC_2.14": true, "memset@GLIBC_2.2.5": true,
	}
	for _, s := range imported {
		if !allowed[s] {
			t.Errorf("imports %s, which is not on the list of what the library may need", s)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(libs)
	if !slices.Equal(libs, []string{"libc.so.6", "libdl.so.2"}) {
		t.Errorf("needs %q, want libc.so.6 and libdl.so.2", libs)
	}
}

// TestAsyncSignalSafe disassembles the library (built with its symbol
// table) and follows every call from the functions a signal handler may
// call — the interposed write calls, close and the descriptor calls, and
// the library's own SIGSEGV handler — through the library's own functions:
// none may reach another library's function but those POSIX.1-2017 lists
// as async-signal-safe (clock_gettime, memcpy, memset; __errno_location,
// errno itself) and sched_getcpu (the vDSO's getcpu), or the real call the
// program made (through the next_* pointers).
func TestAsyncSignalSafe(t *testing.T) {
	needCC(t)
	if _, err := exec.LookPath("objdump"); err != nil {
		t.Skip("no objdump (binutils)")
	}
	obj, _ := rebuild(t, t.TempDir(), "-symbols")
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", obj).Output()
	if err != nil {
		t.Fatal(err)
	}
	calls := callGraph(out)
	roots := []string{"write", "writev", "pwrite", "pwritev", "pwritev2", "close", "dup", "dup2", "dup3",
		"fcntl", "close_range", "sigaction", "on_fault"}
	safe := map[string]bool{"__errno_location": true, "clock_gettime": true, "sched_getcpu": true, "memcpy": true, "memset": true}
	seen := map[string]bool{}
	var walk func(fn string, path []string)
	walk = func(fn string, path []string) {
		// early resolves a call made before the constructor, when no
		// handler of the program's can run (see the source).
		if seen[fn] || fn == "early" {
			return
		}
		seen[fn] = true
		if _, ok := calls[fn]; !ok && !strings.HasPrefix(fn, "next_") && fn != "prog" {
			t.Errorf("%s: no such function in the disassembly", strings.Join(append(path, fn), " → "))
			return
		}
		for _, c := range calls[fn] {
			switch {
			case strings.Contains(c, "@"):
				if name, _, _ := strings.Cut(c, "@"); !safe[name] {
					t.Errorf("not async-signal-safe: %s calls %s", strings.Join(append(path, fn), " → "), c)
				}
			case strings.HasPrefix(c, "next_"):
				// The real call the program made.
			default:
				walk(c, append(path, fn))
			}
		}
	}
	for _, r := range roots {
		walk(r, nil)
	}
	if len(seen) < len(roots)+5 {
		t.Errorf("only %d functions reached from %d roots: the disassembly was not read", len(seen), len(roots))
	}
}

var (
	funcLine = regexp.MustCompile(`^[0-9a-f]+ <([^>]+)>:$`)
	// A call or jump to a function: "call 1234 <submit>", "jmp 1234
	// <write_slow>", "call *0x2fe2(%rip) # 4fd0 <clock_gettime@GLIBC_2.17>",
	// "jmp *0x2f7a(%rip) # 6f40 <next_write>".
	callLine = regexp.MustCompile(`\s(call|jmp)\s+\*?\S*\s*(?:#\s*[0-9a-f]+\s*)?<([^>+]+)(\+0x[0-9a-f]+)?>`)
)

// callGraph reads objdump -d's output: each function's calls and jumps to
// other functions (not to its own labels).
func callGraph(dis []byte) map[string][]string {
	g := map[string][]string{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(dis))
	for sc.Scan() {
		line := sc.Text()
		if m := funcLine.FindStringSubmatch(line); m != nil {
			cur = m[1]
			g[cur] = nil
			continue
		}
		m := callLine.FindStringSubmatch(line)
		if m == nil || cur == "" || m[2] == cur {
			continue
		}
		// A jump into the middle of another function (+0x..) is a
		// branch the compiler shared, still that function's code.
		g[cur] = append(g[cur], m[2])
	}
	return g
}

// TestABIHeader compiles uet_abi.h and checks that every number abi.go
// says is the header's.
func TestABIHeader(t *testing.T) {
	cc := needCC(t)
	want := []struct {
		c   string
		val uint64
	}{
		{"UET_ABI_VERSION", ABIVersion}, {"UET_DATA_INO", DataIno}, {"UET_STATUS_INO", StatusIno},
		{"UET_VOID_INDEX", VoidIndex}, {"UET_TABLE_MAGIC", TableMagic}, {"UET_TABLE_VERSION", TableVersion},
		{"UET_TABLE_HDR", TableHeader}, {"UET_SLOT_SIZE", SlotSize}, {"UET_SLOT_LOCS", SlotLocs},
		{"UET_TABLE_SLOTS", TableSlots}, {"offsetof(struct uet_table_hdr, version)", TableOffVersion},
		{"offsetof(struct uet_table_hdr, nslots)", TableOffNSlots}, {"offsetof(struct uet_table_hdr, slot_size)", TableOffSlotSize},
		{"offsetof(struct uet_slot, word)", SlotOffWord}, {"UET_SLOT_OFF_MINSIZE", SlotOffMinSize},
		{"UET_SLOT_OFF_RINGMAX", SlotOffRingMax}, {"UET_SLOT_OFF_TYPEID", SlotOffTypeID}, {"UET_SLOT_OFF_LOC", SlotOffLoc},
		{"UET_W_READY", WordReady}, {"UET_SLOT_FUSE", SlotFUSE}, {"UET_LOC_REL", LocRel}, {"UET_LOC_CHAR", LocChar},
		{"UET_IOC_ID", IocID}, {"UET_IOC_SHARE", IocShare}, {"UET_IOC_WAKE", IocWake}, {"UET_IOC_FLUSH", IocFlush},
		{"UET_IOC_STATUS", IocStatus}, {"sizeof(struct uet_id)", IDSize}, {"offsetof(struct uet_id, rings)", IDOffRings}, {"sizeof(struct uet_share)", ShareSize},
		{"sizeof(struct uet_status_page)", StatusSize},
		{"offsetof(struct uet_share, size)", ShareOffSize}, {"offsetof(struct uet_share, abi)", ShareOffABI},
		{"offsetof(struct uet_share, set_fd)", ShareOffSetFD}, {"offsetof(struct uet_share, wake_fd)", ShareOffWakeFD},
		{"offsetof(struct uet_share, table_fd)", ShareOffTableFD}, {"offsetof(struct uet_share, flags)", ShareOffFlags},
		{"offsetof(struct uet_share, file_id)", ShareOffFileID}, {"offsetof(struct uet_share, nslots)", ShareOffNSlots},
	}
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include \"uet_abi.h\"\nint main(void) {\n")
	for _, w := range want {
		fmt.Fprintf(&src, "\tprintf(\"%%llu\\n\", (unsigned long long)(%s));\n", w.c)
	}
	src.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "abi.c"), []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	inc, _ := filepath.Abs("c")
	prog := filepath.Join(dir, "abi")
	if out, err := exec.Command(cc, "-Wall", "-Werror", "-I", inc, "-o", prog, filepath.Join(dir, "abi.c")).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	out, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(want) {
		t.Fatalf("%d values printed, %d asked", len(lines), len(want))
	}
	for i, w := range want {
		v, err := strconv.ParseUint(lines[i], 10, 64)
		if err != nil || v != w.val {
			t.Errorf("%s is %s in uet_abi.h, %#x in abi.go", w.c, lines[i], w.val)
		}
	}
}

// TestEarlyCalls: a library the program links initialises before the
// preloaded one, and its constructor's calls — fclose, sigaction, signal,
// closefrom, write — reach libc through the interposer before the
// interposer's constructor ran (libselinux's fclose did, and crashed ls).
func TestEarlyCalls(t *testing.T) {
	needCC(t)
	dir := t.TempDir()
	early := `#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void h(int s) { (void)s; }
__attribute__((constructor)) static void init(void) {
	FILE *f = fopen("/dev/null", "r");
	if (f) fclose(f);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGUSR2, h);
	closefrom(1000);
	write(1, "early\n", 6);
}
void early(void) {}
`
	prog := "void early(void);\nint main(void) { early(); return 0; }\n"
	for name, src := range map[string]string{"early.c": early, "prog.c": prog} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(dir, FileName)
	if err := os.WriteFile(lib, Library, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.BuildC(t, filepath.Join(dir, "libearly.so"), filepath.Join(dir, "early.c"), "-shared", "-fPIC")
	testutil.BuildC(t, filepath.Join(dir, "prog"), filepath.Join(dir, "prog.c"), "-L"+dir, "-Wl,-rpath,"+dir, "-Wl,--no-as-needed", filepath.Join(dir, "libearly.so"))
	cmd := exec.Command(filepath.Join(dir, "prog"))
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "early\n" {
		t.Fatalf("a program whose library calls fclose, sigaction, signal, closefrom and write in its constructor: %v, %q", err, out)
	}
}
