// Package rows holds the CPU "kernels" shared by the host backend and the
// in-memory simulation: packing a token into a transport row, unpacking a
// row into the caller's output, copying rows with streaming stores (Copy,
// fenced once per batch by Fence) and the combine reduction. They touch only the bytes a row really has
// (TokenBytes, then Scales float32 in their own 16-byte aligned slot),
// never the padding.
package rows
