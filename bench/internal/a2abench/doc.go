// Package a2abench is the measurement loop of the bench-a2a program, kept in
// a package so it can be tested: every rank builds an engine and a backend,
// then runs each case (a token count): warmup+iters timed iterations of
// dispatch and combine (each half separately, with a group barrier before
// each phase so ranks start together, a new routing every iteration as a
// serving engine would draw), then, when asked, a few iterations of the
// case compared with the oracle. After each case every rank shares its
// samples and verdict, and Options.OnCase sees the [Case].
//
// The statistics and the printing belong to the program (bench-a2a, over
// the tools' shared report package): Run hands over raw samples.
//
// The bench-a2a main parses flags into a Spec (Spec.Validate rejects a
// bad one before any rank starts), joins a rendezvous group (or spawns the
// ranks with rendezvous.Spawn) and calls Run; rank 0 prints each case as
// OnCase delivers it.
package a2abench
