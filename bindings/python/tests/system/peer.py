"""One side of a two-process transfer, driven over stdin/stdout lines.

    peer.py target TRANSPORT    registers a torch tensor, prints its descriptor
                                and address, waits for the writer's immediates,
                                checks the bytes, prints "ok"
    peer.py writer TRANSPORT    reads them, writes a torch tensor with an
                                immediate (one per NIC), exits
    peer.py watch TRANSPORT     a target that watches the writer and reports
                                when it is declared lost (the writer is killed)
"""

import os
import sys
import threading
import time

import torch

import ferry

NBYTES = 1 << 20
IMM = 0x1234


def expected():
    g = torch.Generator().manual_seed(11)
    return torch.randint(0, 256, (NBYTES,), dtype=torch.uint8, generator=g)


def engine(transport):
    node = "127.0.0.1" if transport.startswith("tcp") else None
    return ferry.Engine(transport, nics=2 if transport != "ipc" else 1, node=node, liveness_interval=0.2,
                        request_timeout=20, stuck_timeout=2)


def main():
    role, transport = sys.argv[1], sys.argv[2]
    e = engine(transport)
    try:
        if role in ("target", "watch"):
            # Over ipc, peers map the target's memory: it must be a HostBuffer.
            hb = ferry.HostBuffer(NBYTES) if transport == "ipc" else None
            dst = hb.torch() if hb is not None else torch.zeros(NBYTES, dtype=torch.uint8)
            region = e.register(hb if hb is not None else dst, remote_write=True)
            landed = e.imm_counter(IMM)
            print("desc %s %s" % (region.descriptor_hex(), e.address_hex()), flush=True)
            writer = bytes.fromhex(sys.stdin.readline().split()[1])
            if role == "target":
                landed.wait(int(sys.stdin.readline().split()[1]), timeout=60)
                ok = torch.equal(dst, expected())
                print("ok" if ok else "bytes differ", flush=True)
            else:
                lost = threading.Event()
                e.on_peer_lost(lambda addr: lost.set())
                e.watch_peer(writer)
                print("watching", flush=True)
                sys.stdin.readline()  # the test killed the writer
                t0 = time.monotonic()
                err = None
                while time.monotonic() - t0 < 30:
                    try:
                        e.peer_status(writer)
                    except ConnectionError as ex:
                        err = ex
                        break
                    time.sleep(0.05)
                print("lost %s %.2f %s %s" % (type(err).__name__ if err else "none", time.monotonic() - t0,
                                              lost.wait(10), isinstance(err, ferry.PeerLostError)), flush=True)
            landed.close()
            region.close()
            if hb is not None:
                del dst
                hb.close()
        else:
            desc_hex, target_addr = sys.stdin.readline().split()[1:3]
            src = expected()
            source = e.register(src)
            print("addr %s" % e.address_hex(), flush=True)
            with ferry.Descriptor.from_hex(desc_hex) as remote, ferry.Transfer() as t:
                e.write(source, remote, imm=IMM, done=t)
                t.wait(60)
                print("imms %d" % e.nics(), flush=True)
            if sys.stdin.readline().strip() == "hang":
                time.sleep(600)
            source.close()
    finally:
        try:
            e.close(timeout=10)
        except ferry.AbandonedError:
            # A worker stuck on the dead peer's connection was left behind:
            # the engine is closed all the same (ferry.h, engine close).
            assert role == "watch"
    assert ferry.live_handles() == 0, "handles left"


if __name__ == "__main__":
    main()
