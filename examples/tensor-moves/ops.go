package main

import (
	"context"
	"fmt"
)

// request turns one client request into worker commands. Within an op,
// moves are issued before the commands that wait for them.
func (d *dispatcher) request(ctx context.Context, m msg) error {
	W := d.t.workers
	get := func(id uint32, want placement) (*tensorInfo, error) {
		t, ok := d.tensors[id]
		if !ok || t.kind != want {
			return nil, fmt.Errorf("client %d op %d: tensor %#x is not a %v tensor", m.Client, m.Op, id, want)
		}
		return t, nil
	}
	noMemory := func() error { return d.reply(ctx, m.Client, m.Op, 0, statusNoMemory) }
	switch m.Kind {
	case reqCreate:
		n := int(m.N)
		if m.Flag == 1 {
			per := n / W
			t := &tensorInfo{kind: sharded, elems: n}
			for w := range W {
				off, ok := d.arenas[w].alloc(4 * per)
				if !ok {
					for v, o := range t.offs {
						d.arenas[v].free(o)
					}
					return noMemory()
				}
				t.offs = append(t.offs, off)
			}
			id, _ := d.begin(m, W)
			d.tensors[m.C] = t
			for w := range W {
				err := d.cmd(ctx, w, msg{Kind: cmdFill, Op: id, Off: [3]uint64{uint64(t.offs[w]), uint64(w * per)}, N: uint64(per), Seed: m.Seed})
				if err != nil {
					return err
				}
			}
			return nil
		}
		w := d.next % W
		d.next++
		off, ok := d.arenas[w].alloc(4 * n)
		if !ok {
			return noMemory()
		}
		id, _ := d.begin(m, 1)
		d.tensors[m.C] = &tensorInfo{kind: whole, elems: n, worker: w, offs: []int{off}}
		return d.cmd(ctx, w, msg{Kind: cmdFill, Op: id, Off: [3]uint64{uint64(off), 0}, N: uint64(n), Seed: m.Seed})

	case reqMove:
		t, err := get(m.A, whole)
		if err != nil {
			return err
		}
		dst := (t.worker + 1) % W
		off, ok := d.arenas[dst].alloc(4 * t.elems)
		if !ok {
			return noMemory()
		}
		id, p := d.begin(m, 1)
		imm := d.imm()
		if err := d.move(ctx, t.worker, t.offs[0], 4*t.elems, 1<<dst, off, imm); err != nil {
			return err
		}
		old, oldOff := t.worker, t.offs[0]
		p.release = append(p.release, func() { d.arenas[old].free(oldOff) })
		t.worker, t.offs[0] = dst, off
		return d.cmd(ctx, dst, msg{Kind: cmdChecksum, Op: id, Off: [3]uint64{uint64(off)}, N: uint64(t.elems), Imm: imm, Count: 1})

	case reqAdd:
		a, err := get(m.A, whole)
		if err != nil {
			return err
		}
		b, err := get(m.B, whole)
		if err != nil {
			return err
		}
		w, n := a.worker, a.elems
		c, ok := d.arenas[w].alloc(4 * n)
		if !ok {
			return noMemory()
		}
		tmp := -1
		if b.worker != w {
			// b comes over to a's worker first, into a temporary.
			if tmp, ok = d.arenas[w].alloc(4 * n); !ok {
				d.arenas[w].free(c)
				return noMemory()
			}
		}
		id, p := d.begin(m, 1)
		d.tensors[m.C] = &tensorInfo{kind: whole, elems: n, worker: w, offs: []int{c}}
		cmd := msg{Kind: cmdAdd, Op: id, Off: [3]uint64{uint64(a.offs[0]), uint64(b.offs[0]), uint64(c)}, N: uint64(n)}
		if tmp >= 0 {
			cmd.Imm, cmd.Count, cmd.Off[1] = d.imm(), 1, uint64(tmp)
			p.release = append(p.release, func() { d.arenas[w].free(tmp) })
			if err := d.move(ctx, b.worker, b.offs[0], 4*n, 1<<w, tmp, cmd.Imm); err != nil {
				return err
			}
		}
		return d.cmd(ctx, w, cmd)

	case reqMatmul:
		a, err := get(m.A, sharded)
		if err != nil {
			return err
		}
		per := a.elems / W
		block := 4 * per
		off, ok := allocAll(d.arenas, 4*a.elems)
		if !ok {
			return noMemory()
		}
		id, p := d.begin(m, W)
		p.replicated = true
		d.tensors[m.C] = &tensorInfo{kind: replicated, elems: a.elems, offs: []int{off}}
		imm, all := d.imm(), uint64(1)<<W-1
		// Every worker multiplies its shard into its block of the result,
		// then writes the block to every other worker (the all-gather).
		for w := range W {
			err := d.cmd(ctx, w, msg{Kind: cmdMatmul, Op: id, Off: [3]uint64{uint64(a.offs[w]), uint64(off + w*block)}, N: uint64(per), Seed: uint64(m.C)})
			if err != nil {
				return err
			}
		}
		for w := range W {
			if W > 1 {
				if err := d.move(ctx, w, off+w*block, block, all&^(1<<w), off+w*block, imm); err != nil {
					return err
				}
			}
		}
		for w := range W {
			if err := d.cmd(ctx, w, msg{Kind: cmdChecksum, Op: id, Off: [3]uint64{uint64(off)}, N: uint64(a.elems), Imm: imm, Count: uint32(W - 1)}); err != nil {
				return err
			}
		}
		return nil

	case reqReduce:
		a, err := get(m.A, sharded)
		if err != nil {
			return err
		}
		root, per := d.next%W, a.elems/W
		d.next++
		out, ok := d.arenas[root].alloc(4 * per)
		if !ok {
			return noMemory()
		}
		tmp, ok := d.arenas[root].alloc(max(4*per*(W-1), 4))
		if !ok {
			d.arenas[root].free(out)
			return noMemory()
		}
		id, p := d.begin(m, 1)
		p.release = append(p.release, func() { d.arenas[root].free(tmp) })
		d.tensors[m.C] = &tensorInfo{kind: whole, elems: per, worker: root, offs: []int{out}}
		imm, j := d.imm(), 0
		for w := range W {
			if w != root {
				if err := d.move(ctx, w, a.offs[w], 4*per, 1<<root, tmp+j*4*per, imm); err != nil {
					return err
				}
				j++
			}
		}
		return d.cmd(ctx, root, msg{Kind: cmdReduce, Op: id, Off: [3]uint64{uint64(a.offs[root]), uint64(tmp), uint64(out)},
			N: uint64(per), Imm: imm, Count: uint32(W - 1)})

	case reqFree:
		t, ok := d.tensors[m.A]
		if !ok {
			return fmt.Errorf("client %d frees unknown tensor %#x", m.Client, m.A)
		}
		switch t.kind {
		case whole:
			d.arenas[t.worker].free(t.offs[0])
		case sharded:
			for w, o := range t.offs {
				d.arenas[w].free(o)
			}
		case replicated:
			for w := range d.arenas {
				d.arenas[w].free(t.offs[0])
			}
		}
		delete(d.tensors, m.A)
		return d.reply(ctx, m.Client, m.Op, 0, statusOK)
	}
	return fmt.Errorf("unknown request %d", m.Kind)
}

func (p placement) String() string { return [...]string{"whole", "sharded", "replicated"}[p] }
