// Package reference computes what expert-parallel dispatch and combine must
// produce, directly from the inputs of every replica group, with no buffers,
// no planner and no transport. It is the oracle every a2a backend is tested
// against.
//
// Dispatch: rank r receives, for each local expert i (global e = r*L+i),
// one row per routing entry (h, t, k) with indices_h[t][k] == e, t < m_h,
// counted once per group however many replicas it has. The rows fill the
// padded segment of expert i in a fixed order: source groups in the
// receiver's visiting order (groups of other NVLink domains first, domain by
// domain starting after the receiver's; then the receiver's own domain
// starting after its own group; its own group last), then t ascending, then
// k ascending. Bytes travel verbatim, scales with their token. In the
// batched layout (Config.MaxTokensPerExpert B > 0) expert i's rows start at
// i*B instead, and more than B copies for any expert of an active rank is
// an error wrapping a2a.ErrExpertOverflow.
//
// Combine: for every token t < m_h of group h,
//
//	out[t] = round(acc), acc = (accumulate ? out[t] : 0) + sum over k of w[t][k] * y(h,t,k)
//
// in fp32, k in column order, each product and each sum rounded to fp32
// (no fused multiply-add), one final round to nearest even into the combine
// type. y(h,t,k) is the expert-output row that sits where dispatch put the
// copy (h,t,k). Every replica of h gets the same result.
//
// With some ranks inactive (DispatchActive, CombineActive: the semantics
// of a2a.Context.SetActiveRanks), a group none of whose replicas is active
// sends nothing and gets nothing, a copy routed to an expert of an
// inactive rank reaches no one, and its slot is left out of the combine
// sum (k still in column order over the others), which makes a token
// whose experts are all inactive combine to 0, or to out[t] with
// accumulate. Inactive ranks receive nothing.
package reference
