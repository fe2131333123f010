package report

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// Text and JSON lines are formatted in batches, on every CPU the process
// may use: ordering the samples must be done in sequence, but the lines
// of samples already in order need nothing from each other — a sample's
// task name and event are resolved before its batch is handed over.
// Batches are written in the order they were made.

// batchLen is the number of samples a batch holds: enough that handing it
// over costs little per sample, few enough that the output stays smooth.
const batchLen = 1024

// batch is a run of samples in time order and, once formatted, their lines.
type batch struct {
	items []item
	out   []byte
	done  chan struct{} // closed when out is ready
}

// lines formats the samples of a report's batches and writes them in order.
type lines struct {
	format Format
	w      io.Writer
	wall   *wallClock // nil: perf clock times only

	cur     *batch
	free    chan *batch // batches to fill: bounds the memory in flight
	work    chan *batch // to the formatters
	ordered chan *batch // to the writer, in the order made
	wg      sync.WaitGroup
	err     error       // the writer's first error
	failed  atomic.Bool // set once err is
	times   timeDigits
}

// newLines starts formatters for w. With one CPU it formats as it goes.
func newLines(w io.Writer, format Format, wall *wallClock) *lines {
	l := &lines{format: format, w: w, wall: wall}
	workers := runtime.GOMAXPROCS(0)
	if workers == 1 {
		l.cur = &batch{}
		return l
	}
	inFlight := 2 * workers
	l.free = make(chan *batch, inFlight)
	l.work = make(chan *batch, inFlight)
	l.ordered = make(chan *batch, inFlight)
	for range inFlight {
		// Lines of user events are mostly under 256 bytes.
		l.free <- &batch{items: make([]item, 0, batchLen), out: make([]byte, 0, batchLen*256)}
	}
	l.wg.Add(workers + 1)
	for range workers {
		go func() {
			defer l.wg.Done()
			var times timeDigits
			for b := range l.work {
				b.out = l.formatBatch(b.out[:0], b.items, &times)
				close(b.done)
			}
		}()
	}
	go func() {
		defer l.wg.Done()
		for b := range l.ordered {
			<-b.done
			if l.err == nil {
				if _, l.err = l.w.Write(b.out); l.err != nil {
					l.failed.Store(true)
				}
			}
			clear(b.items) // no references into the file or its records
			b.items = b.items[:0]
			l.free <- b
		}
	}()
	return l
}

// next returns where the line of the next sample is queued: the caller
// fills it in place — event and heads set — and then calls filled.
func (l *lines) next() (*item, error) {
	if l.failed.Load() {
		return nil, l.err // the writer sets err before failed, and no more after
	}
	if l.cur == nil {
		l.cur = <-l.free
		l.cur.done = make(chan struct{})
	}
	l.cur.items = append(l.cur.items, item{})
	return &l.cur.items[len(l.cur.items)-1], nil
}

// filled hands the current batch over once it is full.
func (l *lines) filled() error {
	if len(l.cur.items) < batchLen {
		return nil
	}
	return l.send()
}

// send hands the current batch over, or with one CPU writes it now.
func (l *lines) send() error {
	b := l.cur
	if l.work == nil {
		b.out = l.formatBatch(b.out[:0], b.items, &l.times)
		b.items = b.items[:0]
		_, err := l.w.Write(b.out)
		return err
	}
	l.cur = nil
	l.work <- b
	l.ordered <- b
	return nil
}

// close writes what is queued and stops the formatters. It returns the
// first write error.
func (l *lines) close() error {
	var err error
	if l.cur != nil && len(l.cur.items) > 0 {
		err = l.send()
	}
	if l.work == nil {
		return err
	}
	close(l.work)
	close(l.ordered)
	l.wg.Wait()
	return l.err
}

func (l *lines) formatBatch(out []byte, items []item, times *timeDigits) []byte {
	for i := range items {
		if l.format == Text {
			out = appendTextWall(out, &items[i], l.wall)
		} else {
			out = appendJSONWall(out, &items[i], times, l.wall)
		}
	}
	return out
}
