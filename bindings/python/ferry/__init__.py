"""ferry: the RDMA transfer engine and the MoE all-to-all from Python, over
libferry's C ABI (ctypes; the wheel carries libferry.so.1).

    import ferry, torch

    with ferry.Engine("shm") as target, ferry.Engine("shm") as writer:
        dst = torch.zeros(1 << 20, dtype=torch.uint8)
        src = torch.arange(1 << 20, dtype=torch.int32).to(torch.uint8)
        region = target.register(dst, remote_write=True)   # zero-copy
        text = region.descriptor_hex()                      # to the writer, out of band
        landed = target.imm_counter(42)
        source = writer.register(src)
        with ferry.Descriptor.from_hex(text) as remote, ferry.Transfer() as t:
            writer.write(source, remote, imm=42, done=t)
            t.wait()
        landed.wait(writer.nics())    # one immediate per NIC: the bytes are there

Memory is registered without copying from anything with the buffer
protocol, __dlpack__ or __cuda_array_interface__ (numpy arrays, torch
tensors; CUDA tensors where the library can register GPU memory), or a
HostBuffer (the memory "ipc" peers map). Every failure raises a FerryError
subclass that is also the matching built-in: FerryTimeoutError is a
TimeoutError, PeerLostError a ConnectionError, InvalidArgumentError and
ClosedError ValueErrors (ferry.errors lists them). Objects are context
managers; close() releases them at once, and a forgotten engine is closed
by its finaliser. Durations are seconds.

Engines that come and go find each other through a Directory (etcd or
in-process; ferry.directory): publish an engine with labels and named
regions, look them up by name or selector, wait for a pool, watch joins
and leaves (lost vs closed) with timeouts.

The library: FERRY_LIBRARY when set, else the copy inside the package,
else the system's libferry.so.1 (`make install`).
"""

from __future__ import annotations

from ._memory import HostBuffer, RawMemory
from .directory import Directory, Entry, Event, Publication, Watch, address_from_hex
from .engine import (Callback, Completion, Counter, Descriptor, Engine, ImmCounter, Lease, Region, Transfer,
                     abi_version, expected_imms, gpu_dmabuf_supported, library_path, live_handles, transports,
                     version)
from .errors import (AbandonedError, BadEncodingError, BrokenError, BusyError, CallOrderError, ClosedError,
                     ExistsError, ExpertOverflowError, FerryError, NotFoundError, UnavailableError,
                     FerryTimeoutError, InternalError, InvalidArgumentError, NICMismatchError,
                     NoMemoryError, NotReadableError, NotSupportedError, OutOfBoundsError, PeerLostError, ProviderError,
                     QueueFullError, RemovedError, RendezvousError, StaleDescriptorError, TimeoutError_,
                     TooLargeError, UnknownRegionError, UnknownTransportError, NotLeasedError,
                     NotifyTooLargeError, LeasesExhaustedError, NotificationsLostError)
from .group import Group, SubGroup, TorchGroup

__all__ = [
    "Engine", "Region", "Descriptor", "Transfer", "Counter", "Callback", "ImmCounter", "Completion", "Lease",
    "NotLeasedError", "NotifyTooLargeError", "LeasesExhaustedError",
    "HostBuffer", "RawMemory", "Group", "SubGroup", "TorchGroup",
    "live_handles", "version", "transports", "library_path", "gpu_dmabuf_supported", "abi_version",
    "FerryError", "InvalidArgumentError", "OutOfBoundsError", "UnknownTransportError", "BadEncodingError",
    "NICMismatchError", "TooLargeError", "ClosedError", "FerryTimeoutError", "TimeoutError_", "PeerLostError",
    "RendezvousError", "NotSupportedError", "NoMemoryError", "ProviderError", "BusyError", "QueueFullError",
    "RemovedError", "AbandonedError", "UnknownRegionError", "InternalError", "CallOrderError", "BrokenError",
    "ExpertOverflowError", "NotFoundError", "ExistsError", "UnavailableError", "StaleDescriptorError",
    "Directory", "Publication", "Watch", "Entry", "Event", "address_from_hex",
    "NotReadableError", "expected_imms",
    "NotificationsLostError",
]
