// Command weight-transfer pushes a model's weights from training ranks to
// inference ranks that shard them differently, the way RL post-training
// refreshes its inference fleet after every optimizer step.
//
// Trainers hold each tensor sharded by rows (FSDP's dim-0 shards);
// inference ranks hold column-parallel layers, embeddings and whole experts
// by rows, row-parallel layers by columns, and norms and routers whole. A
// static schedule, computed once from the two shardings on every rank,
// turns each update into one scatter write per trainer (every contiguous
// piece) plus one paged write per strided tensor (one page per row). For
// every update each inference rank leases one mailbox per trainer that
// writes to it and publishes them; a trainer notifies each of its inference
// ranks once all its writes completed, and the engine hands the
// notification over only after those writes are visible there. An
// inference rank that has every trainer's notification checks every weight
// it holds, then retires the update's leases.
//
//	go run ./examples/weight-transfer -provider shm
//	go run ./examples/weight-transfer -provider tcp -model k2 -shrink 128 -trainers 2 -inference 2
//
// Ranks 0..T-1 are the trainers, T..T+I-1 the inference ranks.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferryrdma/ferry/fabric/job"
	_ "github.com/ferryrdma/ferry/providers" // every transport; a program may import only those it runs on
)

const program = "weight-transfer"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// config is the experiment.
type config struct {
	Model     string `json:"model"`
	Shrink    int    `json:"shrink"`
	Shape     shape  `json:"shape"`
	Trainers  int    `json:"trainers"`
	Inference int    `json:"inference"`
	Updates   int    `json:"updates"`
	Warmup    int    `json:"warmup"`
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o job.Options
	c := config{}
	var over shape
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Bind(fs)
	fs.StringVar(&c.Model, "model", "dense", "model layout: dense (a small dense transformer) or k2 (a 1T-parameter MoE layout, divided by -shrink)")
	fs.IntVar(&c.Shrink, "shrink", 0, "divide the model's widths by this (0: 1 for dense, 128 for k2)")
	fs.IntVar(&over.Layers, "layers", 0, "override the model's layer count")
	fs.IntVar(&over.Hidden, "hidden", 0, "override the hidden size (after -shrink)")
	fs.IntVar(&over.FFN, "ffn", 0, "override the dense MLP width (after -shrink)")
	fs.IntVar(&over.Experts, "experts", 0, "override the routed experts per layer")
	fs.IntVar(&over.ExpertFFN, "expert-ffn", 0, "override each expert's width (after -shrink)")
	fs.IntVar(&over.Vocab, "vocab", 0, "override the vocabulary (after -shrink)")
	fs.IntVar(&c.Trainers, "trainers", 2, "training ranks")
	fs.IntVar(&c.Inference, "inference", 2, "inference ranks")
	fs.IntVar(&c.Updates, "updates", 5, "timed weight updates")
	fs.IntVar(&c.Warmup, "warmup", 1, "untimed updates first (connection setup)")
	err := o.Parse(fs, args)
	if err == nil {
		err = c.resolve(over)
	}
	if err == nil {
		err = job.Run(ctx, o, c.Trainers+c.Inference, func(ctx context.Context, r *job.Rank) error {
			return transfer(ctx, r, c)
		})
	}
	return job.ExitCode(program, err, stderr)
}

// resolve turns -model, -shrink and the overrides into the shape.
func (c *config) resolve(over shape) error {
	s, ok := presets[c.Model]
	if !ok {
		return fmt.Errorf("%w: -model %q: want dense or k2", job.ErrUsage, c.Model)
	}
	if c.Shrink == 0 {
		c.Shrink = 1
		if c.Model == "k2" {
			c.Shrink = 128
		}
	}
	if c.Shrink < 1 {
		return fmt.Errorf("%w: -shrink must be positive", job.ErrUsage)
	}
	s = s.shrink(c.Shrink)
	for _, f := range []struct {
		dst *int
		v   int
	}{{&s.Layers, over.Layers}, {&s.Hidden, over.Hidden}, {&s.FFN, over.FFN},
		{&s.Experts, over.Experts}, {&s.ExpertFFN, over.ExpertFFN}, {&s.Vocab, over.Vocab}} {
		if f.v != 0 {
			*f.dst = f.v
		}
	}
	c.Shape = s
	if err := s.check(); err != nil {
		return fmt.Errorf("%w: %v", job.ErrUsage, err)
	}
	if c.Trainers < 1 || c.Inference < 1 || c.Trainers+c.Inference > 64 || c.Updates < 1 || c.Warmup < 0 {
		return fmt.Errorf("%w: want at least one trainer, one inference rank and one update (64 ranks at most)", job.ErrUsage)
	}
	return nil
}
