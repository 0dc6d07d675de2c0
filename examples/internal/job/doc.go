// Package job is the scaffolding the example programs share, so that each
// program's own files show only the pattern it demonstrates.
//
// A program describes its ranks (how many, what each does) and hands a body
// to Run. Run starts the ranks one of three ways:
//
//   - spawn: the program re-runs itself as one child process per rank,
//     bootstrapped by rendezvous.SpawnLocal (the convenient way on one host);
//   - inproc: every rank is a goroutine of this process with an engine of its
//     own (the only way for the in-process "mem" transport);
//   - env: this process is one rank of a job another launcher started
//     (torchrun, mpirun, srun, or ferry's FERRY_* variables).
//
// Each rank joins the job through fabric/rendezvous, opens its own
// fabric.Engine on the chosen transport, prints Engine.Info (rank 0), and
// swaps main addresses with every other rank. Then the body runs. When it
// returns, the ranks meet at a barrier (so no engine closes while a peer
// still writes into it), close their engines, free their buffers and leave
// the job. Every wait is bounded by the run's deadline (-timeout) and by
// SIGINT/SIGTERM.
//
// Verification failures wrap ErrMismatch; a program exits with status 3 on
// them, 1 on any other failure and 2 on bad flags.
package job
