package record_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/userevents"
)

// EventHeader events written by a provider, recorded, and reported with
// every field and the event's name: on the daemon here, on the kernel's
// perf in the VM (kernel/suites runs this package's kernel targets there).
func TestRecordEventHeader(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		f, err := userevents.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		provider := fmt.Sprintf("RecEH%d", time.Now().UnixNano()%1_000_000_007)
		p, err := ehprovider.New(f, provider, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		req := ehprovider.Define3[uint32, string, int64](p, "Request", eventheader.LevelInformation, 0x5, "status", "path", "delta")
		if err := req.Err(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "perf.data")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		rec := tg.start(t, out, record.Options{Events: []string{provider + "_*"}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		waitEnabled(t, req.Tracepoint().Event(), waitLimit)
		const n = 50
		for i := range n {
			if err := req.Write(uint32(200+i), fmt.Sprintf("/item/%d", i), -int64(i)*1_000_000_007); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if st := rec.Stats(); st.Samples != n || st.Lost != 0 {
			t.Fatalf("stats: %d samples, %d lost; want %d, 0", st.Samples, st.Lost, n)
		}
		got, sum := reportJSON(t, path)
		if sum.Undecoded != 0 || len(got) != n {
			t.Fatalf("report: %d samples, summary %+v", len(got), sum)
		}
		for i, s := range got {
			if s.Name != provider+"_L4K5" {
				t.Errorf("sample %d is %s, want the tracepoint %s_L4K5", i, s.Name, provider)
			}
			want := map[string]any{"status": json.Number(fmt.Sprint(200 + i)), "path": fmt.Sprintf("/item/%d", i), "delta": json.Number(fmt.Sprint(-int64(i) * 1_000_000_007))}
			for k, v := range want {
				if s.Fields[k] != v {
					t.Errorf("sample %d: field %s = %#v, want %#v (fields %v)", i, k, s.Fields[k], v, s.Fields)
				}
			}
			if s.Event != provider+":Request" || s.Meta["level"] != json.Number("4") || s.Meta["keyword"] != "0x5" {
				t.Errorf("sample %d: event %q, meta %v; want %s:Request, level 4, keyword 0x5", i, s.Event, s.Meta, provider)
			}
		}
	})
}
