"""A rank of a two-rank AllToAll whose peer dies: rank 1 builds its
context and is killed by the test; rank 0's dispatch must fail with a
ConnectionError (PeerLostError) or TimeoutError within the context's
deadline, and later calls with BrokenError until set_active.

    a2a_peer.py RANK MASTER TRANSPORT
"""

import sys
import time

import torch

import ferry
from ferry.a2a import AllToAll


def main():
    rank, master, transport = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    world = ferry.Group(env={"FERRY_RANK": str(rank), "FERRY_WORLD_SIZE": "2", "FERRY_MASTER": master,
                             "FERRY_JOB_TOKEN": "a2a-peer"})
    a2a = AllToAll(max_num_tokens=4, num_experts=4, expert_padding=1, hidden_dim=32, hidden_dim_scale=None,
                   in_dtype=torch.float32, out_dtype=torch.float32, scale_dtype=None, num_experts_per_token=2,
                   nets_per_gpu=1, max_private_tokens=None, device="cpu", dp_group=None, node_group=None,
                   global_group=world, backend="host", transport=transport,
                   node="127.0.0.1" if transport.startswith("tcp") else None, timeout=8)
    world.barrier()
    print("ready", flush=True)
    if rank == 1:
        time.sleep(600)  # killed here
    sys.stdin.readline()  # rank 1 is dead
    counts = torch.zeros(a2a.num_local_experts, dtype=torch.int32)
    out_x = torch.zeros(a2a.output_rows, 32)
    x = torch.ones(4, 32)
    idx = torch.tensor([[0, 2]] * 4, dtype=torch.int32)
    w = torch.full((4, 2), 0.5)
    t0 = time.monotonic()
    try:
        a2a.dispatch(counts, out_x, None, x, None, idx, w)
        print("no error", flush=True)
        return 1
    except (ConnectionError, TimeoutError) as e:
        first = "%s %.1f" % (type(e).__name__, time.monotonic() - t0)
    try:
        a2a.dispatch(counts, out_x, None, x, None, idx, w)
        second = "none"
    except ferry.FerryError as e:
        second = type(e).__name__
    try:
        a2a.close()
    except ferry.AbandonedError:
        # The engine's worker stuck on the dead rank's connection was left
        # behind; the context is released all the same.
        pass
    world.close()
    print("failed %s %s %d" % (first, second, ferry.live_handles()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
