package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/bench/internal/cliflag"
	"github.com/ferryrdma/ferry/bench/internal/fabricbench"
	"github.com/ferryrdma/ferry/fabric"
)

// floodWhileRegister is the flood-while-register subcommand: a flood's
// throughput while a large region is registered on the same group, beside
// the worker and on it, and registration time on 1, 2 and 4 NICs
// (fabricbench.RegFlood).
func floodWhileRegister(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fabric-debug flood-while-register", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s fabricbench.RegFloodSpec
	var size, regSize, regNICs string
	var huge, prefault bool
	var modes string
	fs.StringVar(&s.Transport, "transport", fabric.TransportAuto, `transport: auto, efa, verbs, shm, ipc, "tcp;ofi_rxm", mem`)
	cliflag.Alias(fs, "provider", "transport")
	fs.StringVar(&s.Node, "node", "", "address the provider binds to (default 127.0.0.1 for tcp)")
	fs.IntVar(&s.FloodNICs, "nics", 1, "NICs of the flooding engines")
	fs.StringVar(&size, "size", "64K", "size of each flood write")
	fs.IntVar(&s.Depth, "depth", 64, "flood writes in flight")
	fs.StringVar(&regSize, "register", "1G", "size of the region registered beside the flood")
	fs.IntVar(&s.Rounds, "rounds", 5, "registrations per mode beside the flood (the figures are medians)")
	fs.IntVar(&s.RegRounds, "reg-rounds", 0, "registrations per NIC count timed alone (default --rounds)")
	fs.DurationVar(&s.StuckTimeout, "stuck-timeout", 10*time.Minute, "the engines' StuckTimeout: long, so registering on the worker is measured, not abandoned")
	fs.StringVar(&regNICs, "reg-nics", "1,2,4", "NIC counts to time registration alone on (empty: none)")
	fs.BoolVar(&huge, "huge-pages", false, "back the registered region with huge pages where the system has them (default: base pages, the costly case)")
	fs.BoolVar(&prefault, "prefault", false, "write every page of the registered region before registering it (registration then pins pages already there; default: fresh memory, faulted by the registration)")
	fs.DurationVar(&s.Window, "window", 0, "least length of each registering window: a registration that ends sooner is undone and done again until it has passed (0: one registration, the window at least 200ms)")
	fs.StringVar(&modes, "modes", "beside,on-worker", "registration modes to run: beside (as the provider allows), on-worker (Config.RegisterOnWorker)")
	fs.DurationVar(&s.Timeout, "timeout", 10*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		return badArgs(stderr, "flood-while-register", fs.Args())
	}
	sizes, err := fabricbench.ParseSizes(size + "," + regSize)
	if err != nil {
		fmt.Fprintln(stderr, "fabric-debug flood-while-register:", err)
		return exitUsage
	}
	s.Bytes, s.RegisterBytes = sizes[0], sizes[1]
	s.RegNICs = []int{}
	if regNICs != "" {
		if s.RegNICs, err = fabricbench.ParseInts(regNICs); err != nil {
			fmt.Fprintln(stderr, "fabric-debug flood-while-register: --reg-nics:", err)
			return exitUsage
		}
	}
	for _, m := range strings.Split(modes, ",") {
		switch strings.TrimSpace(m) {
		case "beside":
			s.OnWorker = append(s.OnWorker, false)
		case "on-worker":
			s.OnWorker = append(s.OnWorker, true)
		default:
			fmt.Fprintf(stderr, "fabric-debug flood-while-register: --modes: %q is not beside or on-worker\n", m)
			return exitUsage
		}
	}
	s.HugePages = fabric.HugePagesNever
	if huge {
		s.HugePages = fabric.HugePagesAuto
	}
	if s.Node == "" && strings.Contains(s.Transport, "tcp") {
		s.Node = "127.0.0.1"
	}
	s.Prefault = prefault
	s.Progress = stdout
	rep, err := fabricbench.RegFlood(ctx, s)
	if rep != nil {
		rep.Print(stdout)
	}
	return exitStatus(stderr, err)
}
