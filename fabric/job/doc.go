// Package job runs one function as every rank of a small job, each rank
// with an open fabric.Engine of its own and the main address of every other
// rank: the scaffolding of ferry's example programs (examples/), public so
// that a program built the same way, or a copy of one of them in a module of
// its own, needs nothing else from this repository.
//
// A program binds the shared flags (Options.Bind: -provider, -nics, -poll,
// -launch, -json, -timeout, -v and rendezvous' -rank, -world-size,
// -master), says how many ranks it runs and hands a Body to Run. Run starts
// the ranks one of three ways:
//
//   - spawn: the program re-runs itself as one child process per rank,
//     bootstrapped by rendezvous.SpawnLocal (the convenient way on one host);
//   - inproc: every rank is a goroutine of this process with an engine of its
//     own (the only way for the in-process "mem" transport);
//   - env: this process is one rank of a job another launcher started
//     (torchrun, mpirun, srun, or ferry's FERRY_* variables).
//
// Each rank joins the job through fabric/rendezvous, opens its engine on the
// chosen transport, prints Engine.Info (rank 0), and swaps main addresses
// with every other rank. Then the body runs. When it returns, the ranks meet
// at a barrier (so no engine closes while a peer still writes into it),
// close their engines, free their buffers (Rank.Alloc) and leave the job.
// Every wait is bounded by the run's deadline (-timeout) and by the context
// Run is given.
//
// The package registers no transport: a program imports the provider
// packages it runs on (github.com/ferryrdma/ferry/providers for all of
// them).
//
// The programs print their results the same way: Table for aligned
// columns, FormatSize and ParseSize for byte counts with binary suffixes
// (a bad size is a usage error), Summarize for latency percentiles in the
// JSON reports.
//
// Errors follow one convention, so a parent can tell what its children
// found: bad flags wrap ErrUsage (exit status 2), a payload that did not
// verify wraps ErrMismatch (3), an interrupted run ErrInterrupted (130),
// anything else is a failure (1); ExitCode maps an error to its status.
package job
