package main

// The model every mode runs, and the single-process reference the ranks'
// tokens are checked against. It stands in for a transformer with what a
// transport demo needs: activations of [rows, hidden] 2-byte elements, a
// stack of layers each made of two residual blocks, a block's update the
// sum of per-shard partial results (what tensor parallelism all-reduces),
// and a sampled token that depends on every bit of the last activation.
// Arithmetic wraps modulo 2^16, so the sum of partials is exact in any
// order: the pipeline, the tensor-parallel run and the reference must
// agree bit for bit. (There is no attention across tokens: rows are
// independent, which is all the transport sees.)
type model struct {
	Layers int    `json:"layers"`
	Hidden int    `json:"hidden"`
	Shards int    `json:"shards"` // partial results per block (the TP degree)
	Vocab  int    `json:"vocab"`
	Seed   uint64 `json:"seed"`
}

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// partial writes shard s's contribution to block b of layer l for every
// row of x into out: a rotation of the row scaled by odd weights, mixed
// with the row itself.
func (m model) partial(l, b, s int, x, out []uint16) {
	h := m.Hidden
	k := mix(m.Seed ^ uint64(l)<<32 ^ uint64(b)<<24 ^ uint64(s))
	rot, w0 := int(k%uint64(h)), uint16(k>>32)|1
	for r := 0; r < len(x)/h; r++ {
		in, o := x[r*h:(r+1)*h], out[r*h:(r+1)*h]
		for i := range o {
			j := i + rot
			if j >= h {
				j -= h
			}
			o[i] = (w0+uint16(2*i))*in[j] ^ in[i]>>5
		}
	}
}

// block applies block b of layer l to x in place, summing every shard's
// partial (scratch holds two activations' worth of elements).
func (m model) block(l, b int, x, scratch []uint16) {
	acc, part := scratch[:len(x)], scratch[len(x):2*len(x)]
	clear(acc)
	for s := range m.Shards {
		m.partial(l, b, s, x, part)
		for i, v := range part {
			acc[i] += v
		}
	}
	for i, v := range acc {
		x[i] += v
	}
}

// layers applies layers [from, to) to x.
func (m model) layers(from, to int, x, scratch []uint16) {
	for l := from; l < to; l++ {
		m.block(l, 0, x, scratch)
		m.block(l, 1, x, scratch)
	}
}

// embed writes token's embedding at position pos into row.
func (m model) embed(token, pos int, row []uint16) {
	base := uint16(mix(m.Seed^uint64(token)<<20^uint64(pos)) >> 16)
	for i := range row {
		row[i] = base + uint16(i)*40503
	}
}

// sample picks the next token from a final activation row.
func (m model) sample(row []uint16) int {
	z := uint64(len(row))
	for i, v := range row {
		z = z*0x100000001b3 ^ uint64(v)<<(i&31)
	}
	return int(mix(z) % uint64(m.Vocab))
}

// prompt is the seeded prompt.
func (m model) prompt(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = int(mix(m.Seed+uint64(i)) % uint64(m.Vocab))
	}
	return p
}

// checksum folds final activations into the prefill's fingerprint.
func checksum(sum uint64, x []uint16) uint64 {
	for _, v := range x {
		sum = (sum ^ uint64(v)) * 0x100000001b3
	}
	return sum
}

// reference runs the whole model in one process: the prefill's checksum
// and the tokens, the first from the prefill and one per decode step.
func (m model) reference(promptLen, chunk, steps int) (uint64, []int) {
	h := m.Hidden
	x := make([]uint16, chunk*h)
	scratch := make([]uint16, 2*chunk*h)
	prompt := m.prompt(promptLen)
	sum := uint64(0)
	var last []uint16
	for c0 := 0; c0 < promptLen; c0 += chunk {
		rows := min(chunk, promptLen-c0)
		for r := range rows {
			m.embed(prompt[c0+r], c0+r, x[r*h:(r+1)*h])
		}
		m.layers(0, m.Layers, x[:rows*h], scratch)
		sum = checksum(sum, x[:rows*h])
		last = x[(rows-1)*h : rows*h]
	}
	tokens := []int{m.sample(last)}
	row := x[:h]
	for k := 1; k <= steps; k++ {
		m.embed(tokens[k-1], promptLen+k-1, row)
		m.layers(0, m.Layers, row, scratch)
		tokens = append(tokens, m.sample(row))
	}
	return sum, tokens
}
