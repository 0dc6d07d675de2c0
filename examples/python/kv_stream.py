#!/usr/bin/env python3
"""kv_stream.py: a prompt's KV cache from a prefill process to a decode
process, layer by layer, with torch tensors end to end (the Python twin
of examples/kv-stream).

Rank 0 (prefill) holds the KV cache as a torch tensor [layers, pages,
page elements] (16 tokens x KV heads x head dim x K,V per page, vLLM's
block layout). Rank 1 (decode) owns a page pool tensor and, per request,
picks free pages at random and sends the page table over ferry's side
channel (Engine.send, recv_bouncing). The prefill "computes" a layer
(fills its pages, then waits out --layer-time as a GPU would be busy) and
writes the layer's pages with one paged write, one immediate per page; the
decode counts each layer's immediates and checks every page. --stream
writes each layer while the next one computes; --no-stream writes the
whole cache after the prefill. It prints the time to first token split
into compute and the transfer tail left after it.

    python3 kv_stream.py --provider shm
    python3 kv_stream.py --provider tcp --layers 8 --tokens 512

Exit status: 0, 3 on a wrong byte, 1 on any other failure.
"""

import argparse
import queue
import struct
import sys
import time

import torch

import ferry
from _launch import join, spawn, transport_options

PAGE_TOKENS = 16
TAG = 0x4B560000  # immediates: TAG | request << 8 | layer


def page_values(request, layer, pages, elems):
    """The KV values of a layer's pages in request (what both sides compute)."""
    g = torch.Generator().manual_seed(request * 1000 + layer)
    return torch.randn((pages, elems), generator=g).to(torch.bfloat16)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--provider", default="shm", help="shm, tcp, ipc, mem is not multi-process")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--layer-time", type=float, default=0.005, help="seconds of simulated compute per layer")
    p.add_argument("--requests", type=int, default=3)
    p.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rank-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if not a.rank_child:
        return spawn(2, [x for x in sys.argv[1:]], a.timeout)
    blocks = -(-a.tokens // PAGE_TOKENS)
    elems = PAGE_TOKENS * a.kv_heads * a.head_dim * 2
    page_bytes = elems * 2  # bf16
    transport, opts = transport_options(a.provider)
    group = join(a.timeout)
    code = 0
    with ferry.Engine(transport, **opts) as e:
        print("rank %d: %s" % (group.rank, e.info()["transport"]), flush=True)
        if group.rank == 1:
            pool_pages = blocks * a.layers * 2
            # Over ipc the prefill maps the pool: it must be a HostBuffer.
            hb = ferry.HostBuffer(pool_pages * page_bytes) if transport == "ipc" else None
            pool = hb.torch(torch.bfloat16, (pool_pages, elems)) if hb else torch.zeros((pool_pages, elems),
                                                                                      dtype=torch.bfloat16)
            region = e.register(hb if hb else pool, remote_write=True)
            peers = group.all_gather_object((e.address(), region.descriptor_hex()))
            prefill = peers[0][0]
            rng = torch.Generator().manual_seed(5)
            for req in range(a.requests):
                table = torch.randperm(pool_pages, generator=rng)[: blocks * a.layers].view(a.layers, blocks)
                counters = [e.imm_counter(TAG | req << 8 | layer) for layer in range(a.layers)]
                e.send(prefill, struct.pack("<I", req) + table.to(torch.int32).numpy().tobytes())
                for layer, c in enumerate(counters):
                    c.wait(blocks, timeout=a.timeout)  # one immediate per page: the layer is there
                    got = pool[table[layer]]
                    if not torch.equal(got, page_values(req, layer, blocks, elems)):
                        print("decode: request %d layer %d: wrong bytes" % (req, layer), flush=True)
                        code = 3
                    c.close()
            group.barrier()
            region.close()
            if hb:
                del pool
                hb.close()
        else:
            kv = torch.zeros((a.layers, blocks, elems), dtype=torch.bfloat16)
            src = e.register(kv)
            tables = queue.Queue()
            e.recv_bouncing(4, 64 + 4 * blocks * a.layers, tables.put)
            peers = group.all_gather_object((e.address(), ""))
            remote = ferry.Descriptor.from_hex(peers[1][1])
            print("%-8s %-7s %12s %12s %12s" % ("request", "stream", "compute_ms", "tail_ms", "GB/s"))
            counter = ferry.Counter()
            posted = 0
            for req in range(a.requests):
                msg = tables.get(timeout=a.timeout)
                (got_req,) = struct.unpack("<I", msg[:4])
                table = torch.frombuffer(bytearray(msg[4:]), dtype=torch.int32).view(a.layers, blocks)
                assert got_req == req
                t0 = time.perf_counter()

                def send(layer):
                    e.write_pages(src, remote, list(range(layer * blocks, (layer + 1) * blocks)),
                                  table[layer].tolist(), page_bytes, imm=TAG | req << 8 | layer, done=counter)
                for layer in range(a.layers):
                    kv[layer] = page_values(req, layer, blocks, elems)
                    time.sleep(a.layer_time)
                    if a.stream:
                        send(layer)
                if not a.stream:
                    for layer in range(a.layers):
                        send(layer)
                t1 = time.perf_counter()
                posted += a.layers
                counter.wait(posted, timeout=a.timeout)
                t2 = time.perf_counter()
                done, errors = counter.read()
                if errors:
                    print("prefill: %d writes failed" % errors, flush=True)
                    code = 1
                print("%-8d %-7s %12.2f %12.2f %12.2f" % (req, a.stream, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
                                                        a.layers * blocks * page_bytes / (t2 - t0) / 1e9),
                      flush=True)
            group.barrier()
            remote.close()
            counter.close()
            src.close()
    group.barrier()
    group.close()
    if group.rank == 1 and code == 0:
        print("decode: every page of %d requests checked" % a.requests, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
