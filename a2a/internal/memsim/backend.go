package memsim

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

type backend struct {
	rk     *rank
	closed bool
}

var _ a2a.Backend = (*backend)(nil)

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// packRow writes token t of in (bytes, then scales) into row.
func packRow(l *a2a.Layout, row []byte, in *a2a.DispatchInput, t int) {
	xs := orDefault(in.XStride, l.TokenBytes)
	copy(row[:l.TokenBytes], in.X[t*xs:t*xs+l.TokenBytes])
	if l.Scales == 0 {
		return
	}
	ts, es := orDefault(in.ScaleTokenStride, l.Scales), orDefault(in.ScaleElemStride, 1)
	sc := row[(l.TokenBytes+15)&^15:]
	for s := 0; s < l.Scales; s++ {
		binary.LittleEndian.PutUint32(sc[4*s:], math.Float32bits(in.Scales[t*ts+s*es]))
	}
}

// unpackRow writes a dispatch row into output row o.
func unpackRow(l *a2a.Layout, out *a2a.DispatchOutput, o int, row []byte) {
	xs := orDefault(out.XStride, l.TokenBytes)
	copy(out.X[o*xs:o*xs+l.TokenBytes], row[:l.TokenBytes])
	if l.Scales == 0 {
		return
	}
	ts, es := orDefault(out.ScaleTokenStride, l.Scales), orDefault(out.ScaleElemStride, 1)
	sc := row[(l.TokenBytes+15)&^15:]
	for s := 0; s < l.Scales; s++ {
		out.Scales[o*ts+s*es] = math.Float32frombits(binary.LittleEndian.Uint32(sc[4*s:]))
	}
}

func (b *backend) row(buf []byte, r int32) []byte {
	s := b.rk.w.l.Stride()
	return buf[int(r)*s : int(r+1)*s]
}

func (b *backend) DispatchSend(ctx context.Context, p *a2a.Planner, in *a2a.DispatchInput) error {
	rk, l := b.rk, p.Layout()
	sp := p.Send()
	g := l.Group(rk.id)
	E := l.Experts
	copy(rk.table[g*E:(g+1)*E], sp.Counts)
	for _, q := range sp.Routes {
		to := rk.w.ranks[q]
		buf := make([]byte, 4*E)
		for e, c := range sp.Counts {
			binary.LittleEndian.PutUint32(buf[4*e:], c)
		}
		rk.inflight.Add(1)
		d := rk.w.delay()
		go func() {
			defer rk.inflight.Done()
			if d > 0 {
				time.Sleep(d)
			}
			for e := range E {
				to.table[g*E+e] = binary.LittleEndian.Uint32(buf[4*e:])
			}
			to.credit(int(a2a.TagRoute), 1)
		}()
	}
	K := l.ExpertsPerToken
	for i, path := range sp.Path[:sp.Tokens*K] {
		switch {
		case path.Staged():
			packRow(l, b.row(rk.send, sp.Pos[i]), in, i/K)
		case path == a2a.PathNodePush:
			packRow(l, b.row(rk.w.ranks[sp.Dest[i]].recv, sp.PushRow[i]), in, i/K)
		}
	}
	rk.signalNode(sigNodeDispatch)
	for _, t := range sp.Eager {
		rk.writeRows(t, a2a.TagDispatch, false)
	}
	return nil
}

func (b *backend) DispatchRecv(ctx context.Context, p *a2a.Planner, out *a2a.DispatchOutput) error {
	rk, l := b.rk, p.Layout()
	if err := rk.wait(ctx, int(a2a.TagRoute), l.Groups-1); err != nil {
		return err
	}
	if err := p.PlanRecv(rk.table); err != nil {
		return err
	}
	rp := p.Recv()
	for _, t := range rp.Overflow {
		rk.writeRows(t, a2a.TagDispatch, true)
	}
	if err := rk.wait(ctx, sigNodeDispatch, l.NVLinkSize-1); err != nil {
		return err
	}
	copyRecords := func(recs []a2a.Record) {
		for i := range recs {
			rec := &recs[i]
			var src []byte
			switch rec.Kind {
			case a2a.SourceOwnSend:
				src = b.row(rk.send, rec.SrcRow)
			case a2a.SourceOwnRecv:
				src = b.row(rk.recv, rec.SrcRow)
			case a2a.SourcePeerSend:
				src = b.row(rk.w.ranks[rec.Source].send, rec.SrcRow)
			}
			unpackRow(l, out, int(rec.Padded), src)
		}
	}
	copyRecords(rp.Records[rp.NumRemote:])
	if err := rk.wait(ctx, int(a2a.TagDispatch), rp.Imm[a2a.TagDispatch].Expected); err != nil {
		return err
	}
	copyRecords(rp.Records[:rp.NumRemote])
	copy(out.ExpertTokens, rp.TokensPerExpert)
	if out.ExpertOffsets != nil {
		copy(out.ExpertOffsets, rp.ExpertOffsets)
	}
	return rk.barrier(ctx, a2a.TagDispatchBarrier)
}

func (b *backend) CombineSend(ctx context.Context, p *a2a.Planner, in *a2a.CombineInput) error {
	rk, l := b.rk, p.Layout()
	rp := p.Recv()
	ys := orDefault(in.YStride, l.CombineBytes)
	yrow := func(rec *a2a.Record) []byte {
		return in.Y[int(rec.Padded)*ys : int(rec.Padded)*ys+l.CombineBytes]
	}
	for i := range rp.Records[:rp.NumRemote] {
		rec := &rp.Records[i]
		copy(b.row(rk.send, rec.CombineRow), yrow(rec))
	}
	for _, t := range rp.Combine {
		rk.writeRows(t, a2a.TagCombine, true)
	}
	D := l.ReplicaSize
	for i := rp.NumRemote; i < len(rp.Records); i++ {
		rec := &rp.Records[i]
		for q := int(rec.Group) * D; q < int(rec.Group)*D+D; q++ {
			copy(b.row(rk.w.ranks[q].recv, rec.CombineRow), yrow(rec))
		}
	}
	rk.signalNode(sigNodeCombine)
	return nil
}

func (b *backend) CombineRecv(ctx context.Context, p *a2a.Planner, out *a2a.CombineOutput) error {
	rk, l := b.rk, p.Layout()
	if err := rk.wait(ctx, sigNodeCombine, l.NVLinkSize-1); err != nil {
		return err
	}
	if err := rk.wait(ctx, int(a2a.TagCombine), p.Recv().Imm[a2a.TagCombine].Expected); err != nil {
		return err
	}
	sp := p.Send()
	K, H, ct := l.ExpertsPerToken, l.Hidden, l.CombineType
	os := orDefault(out.OutStride, l.CombineBytes)
	acc := make([]float32, H)
	for t := 0; t < sp.Tokens; t++ {
		dst := out.Out[t*os : t*os+l.CombineBytes]
		for x := range acc {
			acc[x] = 0
			if out.Accumulate {
				acc[x] = a2a.DecodeFloat32(ct, dst, x)
			}
		}
		for k := 0; k < K; k++ {
			y := b.row(rk.recv, sp.Pos[t*K+k])
			w := out.Weights[t*K+k]
			for x := range acc {
				acc[x] = a2a.MulAdd(acc[x], w, a2a.DecodeFloat32(ct, y, x))
			}
		}
		for x, v := range acc {
			a2a.EncodeFloat32(ct, dst, x, v)
		}
	}
	return rk.barrier(ctx, a2a.TagCombineBarrier)
}

func (b *backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.rk.inflight.Wait()
	return nil
}
