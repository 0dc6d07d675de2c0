// Package bench is the measurement loop of the bench-a2a program, kept in
// a package so it can be tested: every rank builds an engine and a backend,
// optionally checks a few iterations against the oracle, then times
// warmup+iters iterations of dispatch and combine (each half separately,
// with a group barrier before each phase so ranks start together), draws a
// new routing every iteration as a serving engine would, gathers every
// rank's samples and reports their distribution and the bandwidth implied
// by the nominal bytes (the reference benchmark's statistics).
//
// The bench-a2a main parses flags into a Spec (Spec.Validate rejects a
// bad one before any rank starts), joins a rendezvous group (or spawns the
// ranks with rendezvous.Spawn), calls Run, and rank 0 prints the Report
// with WriteTable and, on request, as JSON.
package bench
