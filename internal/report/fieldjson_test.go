package report_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/report"
)

// sxFormat is the format file Linux 6.12.117 shows for the user event
// "sx s16 v; u16 w; s32 x; s8 y; s64 z; __rel_loc u32[] arr; struct S st 8;
// char[5] c; __data_loc s16[] da; u8 b" (from the VM): note signed:1 on
// the loc fields, whatever their element type, and "char c[]" for char[5].
const sxFormat = "name: sx\nID: 407\nformat:\n" +
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" +
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" +
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" +
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n" +
	"\tfield:s16 v;\toffset:8;\tsize:2;\tsigned:1;\n" +
	"\tfield:u16 w;\toffset:10;\tsize:2;\tsigned:0;\n" +
	"\tfield:s32 x;\toffset:12;\tsize:4;\tsigned:1;\n" +
	"\tfield:s8 y;\toffset:16;\tsize:1;\tsigned:1;\n" +
	"\tfield:s64 z;\toffset:17;\tsize:8;\tsigned:1;\n" +
	"\tfield:__rel_loc u32 arr[];\toffset:25;\tsize:4;\tsigned:1;\n" +
	"\tfield:struct S st;\toffset:29;\tsize:8;\tsigned:1;\n" +
	"\tfield:char c[];\toffset:37;\tsize:5;\tsigned:1;\n" +
	"\tfield:__data_loc s16[] da;\toffset:42;\tsize:4;\tsigned:1;\n" +
	"\tfield:u8 b;\toffset:46;\tsize:1;\tsigned:0;\n\n" +
	"print fmt: \"v=%d w=%u x=%d y=%d z=%lld arr=%llu st=%llu c=%s da=%llu b=%u\", REC->v, REC->w, REC->x, REC->y, REC->z, REC->arr, REC->st, REC->c, REC->da, REC->b\n"

// sxRecord is a record of sx: v and w 0xfffe, x, y and z -2, arr
// [825373492, 0x80000001], st 01…08, c "abcd", da [0xffff, 2], b 200.
// The kernel's trace shows it as "v=0xfffe (65534) w=0xfffe (65534)
// x=0xfffffffe (-2) y='þ'(254) z=0xfffffffffffffffe (-2) …".
func sxRecord() []byte {
	ne := binary.NativeEndian
	r := make([]byte, 47, 59)
	ne.PutUint16(r[0:], 407)
	ne.PutUint32(r[4:], 42)
	ne.PutUint16(r[8:], 0xfffe)
	ne.PutUint16(r[10:], 0xfffe)
	ne.PutUint32(r[12:], 0xfffffffe)
	r[16] = 0xfe
	ne.PutUint64(r[17:], 0xfffffffffffffffe)
	ne.PutUint32(r[25:], 8<<16|(47-29)) // from the end of the loc word
	copy(r[29:], []byte{1, 2, 3, 4, 5, 6, 7, 8})
	copy(r[37:], "abcd\x00")
	ne.PutUint32(r[42:], 4<<16|55)
	r[46] = 200
	r = ne.AppendUint32(r, 825373492)
	r = ne.AppendUint32(r, 0x80000001)
	r = ne.AppendUint16(r, 0xffff)
	return ne.AppendUint16(r, 2)
}

// TestJSONPlainFieldsAsPerfDecode: report --format json shows the fields
// of a tracefs-format event as Microsoft's perf-decode (LinuxTracepoints
// 1.4) shows the same sample — checked by running it on this file:
// integers by the format's signed: flag, those of 1 and 2 bytes
// zero-extended (s16 0xfffe is 65534, as in perf script and the kernel's
// trace text; s32 0xfffffffe is -2), arrays of integers as JSON arrays (a
// __rel_loc u32[] is signed:1, so 0x80000001 is -2147483647), structs as
// their bytes, char arrays as text.
func TestJSONPlainFieldsAsPerfDecode(t *testing.T) {
	f := newFile(t, tracingData(sxFormat), attr("user_events:sx", 407, 7))
	f.comm(7, 42, 42, "sxapp", 0, 0)
	f.sample(7, 42, 42, 1000, 1, sxRecord())
	path := f.close()
	if out := os.Getenv("UETRACE_SX_PERF_DATA"); out != "" {
		// To run perf-decode on the file.
		if err := os.WriteFile(out, readFile(t, path), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := run(t, path, report.JSON)
	want := `{"time":1000,"cpu":1,"pid":42,"tid":42,"comm":"sxapp","system":"user_events","name":"sx","fields":{` +
		`"v":65534,"w":65534,"x":-2,"y":254,"z":-2,"arr":[825373492,-2147483647],"st":"01 02 03 04 05 06 07 08",` +
		`"c":"abcd","da":[65535,2],"b":200}}` + "\n"
	if string(out) != want {
		t.Errorf("json:\n%s\nwant:\n%s", out, want)
	}
	text, _ := run(t, path, report.Text)
	if !bytes.Contains(text, []byte("user_events:sx: v=65534 w=65534 x=-2 y=254 z=-2 arr=3433323101000080 st=0102030405060708 c=abcd da=ffff0200 b=200\n")) {
		t.Errorf("text: %s", strings.TrimSpace(string(text)))
	}
}
