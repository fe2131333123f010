package main

import "fmt"

// eventCmds are registered (and enabled) at start, in this order.
var eventCmds = []string{
	"ovw u32 seq",
	"ovw1 u8 seq",
	"ft_a u32 seq; char[8] tag; s16 v",
	"ft_none",
}

// Sizes of the overwrite scenarios.
var (
	sizeKBs      = []int{4, 8, 12}
	payloadSizes = []int{1, 40, 100, 112, 113, 500, 4000, 4064, 4065}
)

// eventCost is what a record of n bytes takes in a sub-buffer
// (rb_calculate_event_length); used only to choose write counts.
func eventCost(n int) int {
	if n > 112 {
		n += 4
	}
	n = (n + 4 + 3) &^ 3
	if n == 12 {
		n = 16
	}
	return n
}

// pagesFor is how many sub-buffers buffer_size_kb = kb gives.
func pagesFor(kb int) int {
	n := (kb*1024 + 4079) / 4080
	return max(n, 2)
}

type builder struct{ steps []*step }

func (b *builder) add(s *step) *builder { b.steps = append(b.steps, s); return b }

func (b *builder) write(event string, cpu, size int, seq uint32, count int) *builder {
	return b.add(&step{Op: "write", Event: event, CPU: intp(cpu), Size: size, Seq: seq, Count: count})
}

func (b *builder) hex(event string, cpu int, hex string) *builder {
	return b.add(&step{Op: "write_hex", Event: event, CPU: intp(cpu), Hex: hex})
}

func (b *builder) op(op string) *builder           { return b.add(&step{Op: op}) }
func (b *builder) arg(op, arg string) *builder     { return b.add(&step{Op: op, Arg: arg}) }
func (b *builder) cpu(op string, cpu int) *builder { return b.add(&step{Op: op, CPU: intp(cpu)}) }
func (b *builder) sleep(ms int) *builder           { return b.add(&step{Op: "sleep", MS: ms}) }
func (b *builder) pipe(size, reads int) *builder {
	return b.add(&step{Op: "pipe", Size: size, Count: reads})
}
func (b *builder) size(kb int) *builder { return b.arg("buffer_size_kb", fmt.Sprint(kb)) }
func (b *builder) cpuSize(cpu int, kb int) *builder {
	return b.add(&step{Op: "cpu_buffer_size_kb", CPU: intp(cpu), Arg: fmt.Sprint(kb)})
}
func (b *builder) stats() *builder { return b.cpu("stats", 0).cpu("stats", 1) }
func (b *builder) raw() *builder   { return b.cpu("raw", 0).cpu("raw", 1) }
func (b *builder) done(name, doc string) *scenario {
	return &scenario{Name: name, Doc: doc, Steps: b.steps}
}
func (b *builder) read(file string) *builder { return b.arg("read", file) }
func (b *builder) trace() *builder           { return b.op("trace") }
func (b *builder) writes(cpu, size int, seq uint32, count int) *builder {
	ev := "ovw"
	if size < 4 {
		ev = "ovw1"
	}
	return b.write(ev, cpu, size, seq, count)
}

func scenarios() []*scenario {
	var out []*scenario

	// The default (expanded) buffer; records from both CPUs, with gaps
	// under and over 2^27 ns, of every event-header form.
	b := &builder{}
	b.read("buffer_size_kb").read("buffer_total_size_kb").op("trunc")
	b.writes(0, 8, 100, 1).writes(1, 8, 101, 1).sleep(2)
	b.hex("ft_a", 0, "0300000068656c6c6f0000002a00").hex("ft_a", 1, "04000000637075312d3132fefe00")
	b.sleep(150).writes(0, 40, 102, 3).sleep(140).writes(1, 100, 105, 2)
	b.sleep(10).writes(0, 1, 65, 2).sleep(300).writes(0, 113, 110, 1).writes(1, 112, 111, 1)
	b.write("ft_none", 1, 0, 0, 1).writes(1, 500, 112, 1)
	b.trace().stats().raw().trace().stats()
	out = append(out, b.done("lines", "default buffer, both CPUs, time extends, every header form"))

	// Page-boundary cases on CPU 0.
	b = &builder{}
	b.op("trunc")
	b.writes(0, 4044, 200, 1).writes(0, 1, 201, 1) // 4060 + 16 = 4076 bytes
	b.writes(0, 40, 202, 1)                        // 4 bytes left: null padding
	b.sleep(150).writes(0, 4000, 203, 1)           // with its time extend, ends at 4076
	b.sleep(150).writes(0, 40, 204, 1)             // null padding again
	b.writes(0, 3960, 205, 1)                      // ends at 4028
	b.sleep(150).writes(0, 40, 206, 1)             // 52 left < 52+8: padding event, no extend
	b.writes(0, 4064, 207, 1)                      // the largest record: a page of its own
	b.writes(0, 4065, 208, 1)                      // too large: dropped
	b.writes(0, 4064, 209, 1)                      // full page before it: no padding at all
	b.trace().stats().raw().trace()
	out = append(out, b.done("edge", "page boundaries, padding, time extends that do not fit, oversized record"))

	for _, kb := range sizeKBs {
		for _, p := range payloadSizes {
			pages := pagesFor(kb)
			n := 4080 / eventCost(8+p)
			count := n*pages*2 + n/2 + 1
			if 8+p > 4072 {
				count = 3
			}
			b = &builder{}
			b.op("trunc").size(kb).read("buffer_size_kb")
			b.writes(0, p, 1000, count)
			b.trace().cpu("stats", 0).cpu("raw", 0).trace()
			out = append(out, b.done(fmt.Sprintf("size-%dk-%d", kb, p),
				fmt.Sprintf("buffer_size_kb %d, %d writes of a %d-byte payload on CPU 0", kb, count, p)))
		}
	}

	b = &builder{}
	b.op("trunc").size(1408).read("buffer_size_kb")
	b.writes(0, 8, 1, 3).arg("tracing_on", "0").writes(0, 8, 4, 3).writes(1, 8, 7, 1)
	b.trace().stats().read("tracing_on")
	b.arg("tracing_on", "1").writes(0, 8, 8, 2).trace().stats()
	out = append(out, b.done("tracing_on", "writes while tracing_on is 0"))

	b = &builder{}
	b.op("trunc").writes(0, 8, 1, 5).writes(1, 8, 6, 3).trace()
	b.op("trunc").trace().stats().writes(0, 8, 9, 2).trace().stats()
	out = append(out, b.done("trunc", "O_TRUNC open of trace"))

	b = &builder{}
	b.op("trunc")
	for i := uint32(0); i < 6; i++ {
		b.writes(int(i%2), 8, 10+i, 1)
	}
	b.writes(0, 40, 20, 3).pipe(0, 0).trace().stats().pipe(0, 0)
	out = append(out, b.done("pipe", "trace_pipe consumes"))

	b = &builder{}
	b.op("trunc").writes(0, 8, 1, 10).writes(1, 8, 11, 2).trace()
	b.pipe(1, 1).trace().pipe(100, 1).trace().pipe(300, 2).trace().stats()
	out = append(out, b.done("pipe-partial", "short trace_pipe reads: how much each consumes"))

	b = &builder{}
	b.op("trunc").size(4).writes(0, 40, 1, 200).writes(1, 40, 500, 3)
	b.stats().pipe(0, 0).trace().stats()
	out = append(out, b.done("pipe-lost", "trace_pipe after overruns"))

	b = &builder{}
	b.op("trunc").size(4).writes(0, 40, 1, 10).trace().pipe(1, 1).trace().stats()
	b.writes(0, 40, 11, 300).trace().stats().pipe(0, 0).trace().stats()
	out = append(out, b.done("reader-page", "a partly consumed reader page survives overwrite"))

	b = &builder{}
	b.op("trunc").size(4).writes(0, 40, 1, 10).trace().pipe(1, 1)
	b.writes(0, 40, 11, 300).raw().trace().stats()
	out = append(out, b.done("reader-page-raw", "raw pages after a partly consumed reader page"))

	b = &builder{}
	b.op("trunc").size(4).writes(1, 40, 1, 5).writes(0, 40, 100, 200).trace()
	b.op("trunc").writes(0, 40, 300, 200).writes(1, 40, 600, 5).trace()
	b.op("trunc").writes(0, 40, 700, 2).writes(1, 40, 710, 2).writes(0, 40, 720, 2).trace()
	// The banner is not printed for the second entry of the trace.
	b.op("trunc").writes(1, 40, 800, 1).writes(0, 40, 810, 200).trace()
	b.op("trunc").writes(1, 40, 1100, 2).writes(0, 40, 1110, 200).trace()
	out = append(out, b.done("annotate", "CPU buffer started banners after overruns"))

	b = &builder{}
	b.op("trunc").size(12).writes(0, 40, 1, 200).trace().stats()
	b.size(4).read("buffer_size_kb").trace().stats()
	b.size(12).read("buffer_size_kb").writes(0, 40, 201, 100).trace().stats()
	b.op("trunc").size(8).writes(0, 40, 400, 400).size(4).trace().stats()
	b.cpuSize(1, 8).read("buffer_size_kb").read("per_cpu/cpu1/buffer_size_kb").read("per_cpu/cpu0/buffer_size_kb")
	b.writes(1, 40, 900, 300).trace().stats()
	out = append(out, b.done("resize", "buffer_size_kb with data in the buffer"))

	b = &builder{}
	b.op("trunc").size(1408).writes(0, 8, 1, 100).writes(1, 8, 101, 100)
	b.op("pipe_busy").arg("pipe2", "all").trace()
	b.writes(0, 8, 201, 50).writes(1, 8, 301, 50).arg("pipe2", "percpu").trace()
	b.writes(0, 8, 401, 3).writes(1, 8, 501, 3).add(&step{Op: "pipe", CPU: intp(1)}).trace().pipe(0, 0)
	out = append(out, b.done("pipe2", "trace_pipe readers at once: the whole-buffer pipe and the per-CPU ones"))

	// Last: it drops the registrations of the shared fd.
	b = &builder{}
	b.op("trunc").arg("dyn", "u:ft_del u32 x").arg("reg_only", "ft_del u32 x").arg("enable", "ft_del")
	b.hex("ft_del", 0, "2a000000").writes(0, 4, 1, 1).arg("disable", "ft_del").trace()
	b.arg("unreg", "ft_del").op("close_reopen").arg("iocsdel", "ft_del").read("user_events_status").trace()
	b.arg("reg_only", "ft_new u32 y").hex("ft_new", 1, "05000000").trace()
	b.arg("enable", "ft_new").hex("ft_new", 1, "06000000").arg("disable", "ft_new").trace()
	b.arg("unreg", "ft_new").op("close_reopen").arg("reg_only", "ovw u32 seq")
	// Deleting an event that was enabled only marks the buffer to be
	// cleared; the next delete through dynamic_events clears it.
	b.arg("dyn", "u:ft_d3 u32 w").arg("dyn", "!u:ft_d3 u32 w").trace()
	b.writes(0, 4, 2, 1).arg("dyn", "u:ft_d2 u32 z").arg("reg_only", "ft_d2 u32 z").arg("enable", "ft_d2")
	b.hex("ft_d2", 1, "07000000").arg("disable", "ft_d2").trace()
	b.arg("unreg", "ft_d2").op("close_reopen").arg("reg_only", "ovw u32 seq").sleep(100)
	b.arg("dyn", "!u:ft_d2 u32 z").trace().stats()
	b.writes(0, 4, 3, 1).arg("dyn", "!u:ft_nothing u32 q").trace()
	out = append(out, b.done("deleted", "records of deleted events; deleting through dynamic_events"))
	return out
}
