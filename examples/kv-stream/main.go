// Command kv-stream moves a prompt's KV cache from a prefill process to a
// decode process the way disaggregated serving does: paged one-sided writes
// from the prefill's per-layer KV pages into the decode's page pool.
//
// With -stream=false the prefill sends the whole cache after the whole
// prefill (what a TCP-based split does today); with -stream=true it writes
// each layer's pages while the next layer computes, so only the last
// layer's transfer is left when the prefill ends. It prints the time to
// first token split into prefill compute and the transfer tail that was not
// hidden behind compute, and the transfer's GB/s and pages/s.
//
//	go run ./examples/kv-stream -provider shm
//	go run ./examples/kv-stream -provider tcp -layers 32 -tokens 2048 -stream=true
//
// Rank 0 is the prefill, rank 1 the decode. Every page is checked byte for
// byte at the decode; a wrong byte ends the program with status 3.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
	_ "github.com/ferryrdma/ferry/providers" // every transport; a program may import only those it runs on
)

const program = "kv-stream"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// config is the shape of the model's KV cache and of the experiment.
type config struct {
	Layers     int           `json:"layers"`
	Tokens     int           `json:"tokens"`      // prompt length
	PageTokens int           `json:"page_tokens"` // tokens per page (vLLM's block size)
	KVHeads    int           `json:"kv_heads"`
	HeadDim    int           `json:"head_dim"`
	DtypeBytes int           `json:"dtype_bytes"`
	LayerTime  time.Duration `json:"layer_time_ns"` // simulated prefill compute per layer
	Modes      []bool        `json:"stream_modes"`  // the -stream settings to run, in turn
	Requests   int           `json:"requests"`      // timed requests per mode
	Warmup     int           `json:"warmup"`        // untimed requests first
	PoolFactor int           `json:"pool_factor"`   // decode pool = factor x one request's pages
	Seed       uint64        `json:"seed"`
}

// pageBytes is one page: K and V for PageTokens tokens of every KV head.
func (c config) pageBytes() int { return c.PageTokens * c.KVHeads * c.HeadDim * 2 * c.DtypeBytes }

// blocks is how many pages a layer of the prompt takes.
func (c config) blocks() int { return (c.Tokens + c.PageTokens - 1) / c.PageTokens }

// streamFlag is -stream: true, false or both (a bare -stream means true).
type streamFlag struct{ modes *[]bool }

func (s streamFlag) IsBoolFlag() bool { return true }
func (s streamFlag) String() string {
	if s.modes == nil || len(*s.modes) != 1 {
		return "both"
	}
	return fmt.Sprint((*s.modes)[0])
}
func (s streamFlag) Set(v string) error {
	switch v {
	case "true":
		*s.modes = []bool{true}
	case "false":
		*s.modes = []bool{false}
	case "both":
		*s.modes = []bool{false, true}
	default:
		return fmt.Errorf("want true, false or both")
	}
	return nil
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o job.Options
	c := config{Modes: []bool{false, true}}
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Bind(fs)
	fs.IntVar(&c.Layers, "layers", 16, "transformer layers")
	fs.IntVar(&c.Tokens, "tokens", 1024, "prompt tokens")
	fs.IntVar(&c.PageTokens, "page-tokens", 16, "tokens per KV page")
	fs.IntVar(&c.KVHeads, "kv-heads", 8, "KV heads")
	fs.IntVar(&c.HeadDim, "head-dim", 128, "head dimension")
	fs.IntVar(&c.DtypeBytes, "dtype-bytes", 2, "bytes per element (2: bf16)")
	fs.DurationVar(&c.LayerTime, "layer-time", 5*time.Millisecond, "simulated prefill compute per layer")
	fs.Var(streamFlag{&c.Modes}, "stream", "write each layer's pages as soon as it is computed: true, false or both")
	fs.IntVar(&c.Requests, "requests", 5, "timed requests per -stream mode")
	fs.IntVar(&c.Warmup, "warmup", 1, "untimed requests first (connection setup)")
	fs.IntVar(&c.PoolFactor, "pool-factor", 2, "decode page pool size, in requests")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the page contents and page tables")
	err := o.Parse(fs, args)
	if err == nil {
		err = c.check()
	}
	if err == nil {
		err = job.Run(ctx, o, 2, func(ctx context.Context, r *job.Rank) error {
			if r.ID == 0 {
				return prefill(ctx, r, c)
			}
			return decode(ctx, r, c)
		})
	}
	return job.ExitCode(program, err, stderr)
}

func (c config) check() error {
	switch {
	case c.Layers < 1 || c.Layers > 1<<12, c.Tokens < 1, c.PageTokens < 1, c.KVHeads < 1, c.HeadDim < 1,
		c.DtypeBytes < 1, c.Requests < 1, c.Warmup < 0, c.PoolFactor < 1:
		return fmt.Errorf("%w: shapes and counts must be positive (layers at most 4096)", job.ErrUsage)
	case c.pageBytes()%8 != 0:
		return fmt.Errorf("%w: a page of %d bytes is not a multiple of 8", job.ErrUsage, c.pageBytes())
	case 1024+4*c.blocks() > maxMessage: // the table, the header and the mailbox
		return fmt.Errorf("%w: a page table of %d pages does not fit one %d-byte side-channel message",
			job.ErrUsage, c.blocks(), maxMessage)
	}
	return nil
}
