#!/usr/bin/env python3
"""pipeline_ring.py: activations around a ring of pipeline stages, torch
tensors end to end (the Python twin of examples/pipeline-ring).

W processes form a ring; stage r holds a weight matrix and computes
tanh(x @ W_r). Rank 0 feeds micro-batches to stage 1, each stage writes
its output into the next stage's inbox slot with an immediate naming the
slot, and the last stage's outputs come back to rank 0, which checks them
against the whole pipeline computed locally. A stage hands a slot back to
its writer with an immediate-only write once it has read it (credits), so
at most --slots micro-batches are in flight per hop.

    python3 pipeline_ring.py --provider shm --world-size 3

Exit status: 0, 3 on a wrong result, 1 on any other failure.
"""

import argparse
import sys
import time

import torch

import ferry
from _launch import join, spawn, transport_options

DATA, CREDIT = 0x50520000, 0x50530000  # | slot


def weights(rank, hidden):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn((hidden, hidden), generator=g) / hidden ** 0.5


def batch(i, rows, hidden):
    g = torch.Generator().manual_seed(i)
    return torch.randn((rows, hidden), generator=g)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--provider", default="shm")
    p.add_argument("--world-size", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--rows", type=int, default=16, help="tokens per micro-batch")
    p.add_argument("--micro-batches", type=int, default=12)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rank-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if not a.rank_child:
        return spawn(a.world_size, sys.argv[1:], a.timeout)
    transport, opts = transport_options(a.provider)
    group = join(a.timeout)
    rank, world = group.rank, group.size
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    shape = (a.slots, a.rows, a.hidden)
    nbytes = a.slots * a.rows * a.hidden * 4
    code = 0
    with ferry.Engine(transport, **opts) as e:
        # Over ipc, memory peers write must be a HostBuffer.
        hb = ferry.HostBuffer(nbytes) if transport == "ipc" else None
        inbox = hb.torch(torch.float32, shape) if hb else torch.zeros(shape)
        outbox = torch.zeros(shape)
        r_in = e.register(hb if hb else inbox, remote_write=True)
        r_out = e.register(outbox)
        arrived = [e.imm_counter(DATA | s) for s in range(a.slots)]
        credits = [e.imm_counter(CREDIT | s) for s in range(a.slots)]
        descs = group.all_gather_object(r_in.descriptor_hex())
        to_next = ferry.Descriptor.from_hex(descs[nxt])
        to_prev = ferry.Descriptor.from_hex(descs[prev])
        w = weights(rank, a.hidden)
        sent = ferry.Counter()
        posted = 0
        print("rank %d: %s, %d stages" % (rank, e.info()["transport"], world), flush=True)

        def forward(i, x):
            """x into the next stage's slot i % slots, once it is free."""
            nonlocal posted
            s = i % a.slots
            if i >= a.slots:
                credits[s].wait(1, timeout=a.timeout)  # the next stage read what was there
            outbox[s] = x
            e.write(r_out, to_next, a.rows * a.hidden * 4, src_offset=s * a.rows * a.hidden * 4,
                    dst_offset=s * a.rows * a.hidden * 4, imm=DATA | s, route=("pinned", 0), done=sent)
            posted += 1

        def receive(i):
            """Micro-batch i from the previous stage; its slot goes back."""
            s = i % a.slots
            arrived[s].wait(1, timeout=a.timeout)
            x = inbox[s].clone()
            e.write_imm(CREDIT | s, to_prev)
            return x

        t0 = time.perf_counter()
        if rank == 0:
            wrong = 0
            for i in range(a.micro_batches + a.slots - 1):
                if i < a.micro_batches:
                    forward(i, torch.tanh(batch(i, a.rows, a.hidden) @ w))
                j = i - (a.slots - 1)
                if j >= 0:
                    y = receive(j)
                    want = batch(j, a.rows, a.hidden)
                    for r in range(world):
                        want = torch.tanh(want @ weights(r, a.hidden))
                    if not torch.allclose(y, want, rtol=1e-5, atol=1e-6):
                        wrong += 1
            dt = time.perf_counter() - t0
            print("%-12s %10s %14s %10s" % ("micro-batch", "stages", "us/micro-batch", "wrong"))
            print("%-12d %10d %14.0f %10d" % (a.micro_batches, world, dt / a.micro_batches * 1e6, wrong), flush=True)
            code = 3 if wrong else 0
        else:
            for i in range(a.micro_batches):
                forward(i, torch.tanh(receive(i) @ w))
        sent.wait(posted, timeout=a.timeout)
        if sent.read()[1]:
            code = 1
        group.barrier()  # every credit and write has landed before anyone closes
        for h in arrived + credits + [to_next, to_prev, sent, r_in, r_out]:
            h.close()
        if hb:
            del inbox
            hb.close()
    group.barrier()
    group.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
