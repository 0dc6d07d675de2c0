// Command pipeline-ring runs a model split across a ring of ranks, the way
// exo runs one shard of layers per peer: the prompt's prefill in chunks
// that overlap across the stages, then decode tokens around the ring.
//
// Each rank writes its activations into its successor's receive ring with
// one-sided writes; the receiver counts the slot's immediates and hands
// the slot back with a credit immediate, so a stage runs ahead of the next
// by at most -slots messages. -mode relay sends each sampled token from the
// last rank back to rank 0 (exo's ring); -mode allgather writes the last
// layer's output to every rank, and each samples the token itself (exo's
// newer pattern); -mode both (the default) runs one then the other. -tp
// runs tensor parallelism instead: every rank holds a shard of every layer
// and each layer ends its two blocks with an all-reduce of the [1, hidden]
// activation. -probe prints the NxN latency and bandwidth matrix between the
// ranks, the link metrics a placement needs, and exits.
//
// Every token, and a checksum of the prefill's output, is checked against
// a single-process run of the same model (a mismatch exits 3).
//
//	go run ./examples/pipeline-ring -provider shm
//	go run ./examples/pipeline-ring -provider tcp -ranks 4 -hidden 8192 -mode relay
//	go run ./examples/pipeline-ring -provider shm -tp
//	go run ./examples/pipeline-ring -provider tcp -probe
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

const program = "pipeline-ring"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// config is the model and the experiment.
type config struct {
	Ranks            int           `json:"ranks"`
	Layers           int           `json:"layers"`
	Hidden           int           `json:"hidden"`
	Vocab            int           `json:"vocab"`
	Prompt           int           `json:"prompt"`
	Chunk            int           `json:"chunk"`
	Tokens           int           `json:"tokens"`
	Modes            []string      `json:"modes"`
	TP               bool          `json:"tp"`
	Slots            int           `json:"slots"`
	PrefillLayerTime time.Duration `json:"prefill_layer_time_ns"`
	DecodeLayerTime  time.Duration `json:"decode_layer_time_ns"`
	Probe            bool          `json:"probe"`
	ProbeBytes       int           `json:"probe_bytes"`
	ProbeIters       int           `json:"probe_iters"`
	Seed             uint64        `json:"seed"`
}

func (c config) model() model {
	return model{Layers: c.Layers, Hidden: c.Hidden, Shards: c.Ranks, Vocab: c.Vocab, Seed: c.Seed}
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o job.Options
	var c config
	var mode, probeBytes string
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Bind(fs)
	fs.IntVar(&c.Ranks, "ranks", 3, "ranks in the ring")
	fs.IntVar(&c.Layers, "layers", 12, "layers of the model")
	fs.IntVar(&c.Hidden, "hidden", 2048, "hidden size (2-byte elements: one decode hop is 2 x hidden bytes)")
	fs.IntVar(&c.Vocab, "vocab", 32000, "vocabulary")
	fs.IntVar(&c.Prompt, "prompt", 256, "prompt tokens")
	fs.IntVar(&c.Chunk, "chunk", 32, "prefill chunk, tokens (exo: 4096/min(4, ranks))")
	fs.IntVar(&c.Tokens, "tokens", 32, "decode steps per mode")
	fs.StringVar(&mode, "mode", "both", "decode pattern: relay, allgather or both")
	fs.BoolVar(&c.TP, "tp", false, "tensor parallel instead of a pipeline: two all-reduces of [1, hidden] per layer")
	fs.IntVar(&c.Slots, "slots", 4, "slots per receive ring")
	fs.DurationVar(&c.PrefillLayerTime, "prefill-layer-time", 2*time.Millisecond, "simulated compute of one layer on one chunk")
	fs.DurationVar(&c.DecodeLayerTime, "decode-layer-time", 0, "simulated compute of one layer on one token")
	fs.BoolVar(&c.Probe, "probe", false, "print the NxN latency and bandwidth matrix between the ranks and exit")
	fs.StringVar(&probeBytes, "probe-bytes", "4M", "size of the probe's bandwidth writes")
	fs.IntVar(&c.ProbeIters, "probe-iters", 200, "round trips per latency sample")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the model and the prompt")
	err := o.Parse(fs, args)
	if err == nil {
		err = c.finish(mode, probeBytes)
	}
	if err == nil {
		err = job.Run(ctx, o, c.Ranks, func(ctx context.Context, r *job.Rank) error { return runRank(ctx, r, c) })
	}
	return job.ExitCode(program, err, stderr)
}

func (c *config) finish(mode, probeBytes string) error {
	switch mode {
	case "relay", "allgather":
		c.Modes = []string{mode}
	case "both":
		c.Modes = []string{"relay", "allgather"}
	default:
		return fmt.Errorf("%w: -mode %q: want relay, allgather or both", job.ErrUsage, mode)
	}
	if c.TP {
		c.Modes = []string{"tp"}
	}
	n, err := job.ParseSize(probeBytes)
	if err != nil {
		return err
	}
	c.ProbeBytes = int(n)
	switch {
	case c.Ranks < 2 || c.Ranks > 64:
		return fmt.Errorf("%w: -ranks %d: want 2 to 64", job.ErrUsage, c.Ranks)
	case !c.TP && c.Layers < c.Ranks:
		return fmt.Errorf("%w: %d layers cannot be split over %d ranks", job.ErrUsage, c.Layers, c.Ranks)
	case c.Layers < 1 || c.Hidden < 4 || c.Vocab < 2 || c.Prompt < 1 || c.Chunk < 1 || c.Tokens < 1 || c.ProbeIters < 1:
		return fmt.Errorf("%w: shapes and counts must be positive (hidden at least 4)", job.ErrUsage)
	case c.Slots < 1 || c.Slots > 1<<12:
		return fmt.Errorf("%w: -slots %d: want 1 to 4096", job.ErrUsage, c.Slots)
	case c.PrefillLayerTime < 0 || c.DecodeLayerTime < 0:
		return fmt.Errorf("%w: negative compute time", job.ErrUsage)
	}
	c.Chunk = min(c.Chunk, c.Prompt)
	return nil
}
