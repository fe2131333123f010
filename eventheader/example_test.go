package eventheader_test

import (
	"fmt"

	"github.com/uetrace/uetrace/eventheader"
)

func Example() {
	// The tracepoint an event of provider MyProvider, level 4 (information)
	// and keyword 0x1 is written to, and the command that registers it.
	tp := eventheader.TracepointName{Provider: "MyProvider", Level: eventheader.LevelInformation, Keyword: 1}
	fmt.Println(tp.Command())

	// Build an event (reuse the Builder and the buffer: no allocation).
	var b eventheader.Builder
	buf := make([]byte, 0, 256)
	b.Reset("Request", eventheader.Header{Level: eventheader.LevelInformation})
	b.AddUint32("status", 200, eventheader.FormatDefault, 0)
	b.AddString("path", "/index.html", eventheader.FormatDefault, 0)
	b.AddUint32("err", 2, eventheader.FormatErrno, 0)
	ev, err := b.AppendEvent(buf)
	if err != nil {
		panic(err)
	}

	// Decode it and walk its fields.
	e, err := eventheader.Decode(tp.String(), ev)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s:%s level %d keyword %#x\n", e.Tracepoint.Provider, e.EventName(), e.Header.Level, e.Tracepoint.Keyword)
	f := e.Fields()
	for f.Next() {
		it := f.Item()
		fmt.Printf("  %s %v %v %s\n", it.Name, it.Encoding, it.Format, it.AppendJSON(nil))
	}
	js, _ := e.AppendJSON(nil)
	fmt.Println(string(js))
	// Output:
	// MyProvider_L4K1 u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level
	// MyProvider:Request level 4 keyword 0x1
	//   status value32 default 200
	//   path string_length16_char8 default "/index.html"
	//   err value32 errno "ENOENT(2)"
	// { "n": "MyProvider:Request", "status": 200, "path": "/index.html", "err": "ENOENT(2)", "meta": { "level": 4, "keyword": "0x1" } }
}
