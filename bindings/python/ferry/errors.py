"""ferry's exceptions: one class per FERRY_E_* code, each also an instance
of the built-in exception a Python caller would catch for it.

    FerryError                       every failure of a libferry call
      InvalidArgumentError           ValueError: bad argument, nothing posted
        OutOfBoundsError             a local or remote range outside its region
        UnknownTransportError        no provider serves the named transport
        BadEncodingError             descriptor or address bytes that do not decode
        NICMismatchError             descriptor wider than any group, or not its engine's
        TooLargeError                a message larger than the send buffers
      ClosedError                    ValueError: the engine (or object) is closed, as for closed files
      FerryTimeoutError              TimeoutError: a wait's deadline passed
      PeerLostError                  ConnectionError: a peer or rank died or went away
        StaleDescriptorError         its engine is gone or was replaced: fetch a fresh descriptor
      RendezvousError                ConnectionError: bootstrap refused or out of protocol
      NotSupportedError              NotImplementedError: not on this machine, build or provider
      NoMemoryError                  MemoryError: the system refused memory
      CallOrderError                 RuntimeError: an a2a call out of its cycle, nothing changed
      BrokenError                    RuntimeError: an a2a context broken by an earlier failure
      ExpertOverflowError            ValueError: batched layout, an expert got more than max_tokens_per_expert
      NotFoundError                  LookupError: no directory entry or region of that name
      ExistsError                    ValueError: a live publication already holds the engine name
      UnavailableError               ConnectionError: the directory's server cannot be reached
      NotReadableError               PermissionError: a read of a region its owner did not make readable
      NotificationsLostError         LookupError: notifications to a lease were lost; reported in their place
      ProviderError, BusyError, QueueFullError, RemovedError, AbandonedError,
      UnknownRegionError, InternalError
"""

from __future__ import annotations

from typing import Dict, Type

from . import _abi


class FerryError(Exception):
    """A libferry call failed: code is the FERRY_E_* value, name its name
    ("FERRY_E_CLOSED"), func the C function, message the library's text."""

    def __init__(self, func: str, code: int, name: str, message: str) -> None:
        self.func, self.code, self.name, self.message = func, code, name, message
        super().__init__("%s: %s: %s" % (func, name, message))

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Exceptions cross process boundaries (multiprocessing) intact.
        return (type(self), (self.func, self.code, self.name, self.message))


class InvalidArgumentError(FerryError, ValueError):
    pass


class OutOfBoundsError(InvalidArgumentError):
    pass


class UnknownTransportError(InvalidArgumentError):
    pass


class BadEncodingError(InvalidArgumentError):
    pass


class NICMismatchError(InvalidArgumentError):
    pass


class TooLargeError(InvalidArgumentError):
    pass


class ClosedError(FerryError, ValueError):
    pass


class FerryTimeoutError(FerryError, TimeoutError):
    pass


class PeerLostError(FerryError, ConnectionError):
    pass


class StaleDescriptorError(PeerLostError):
    pass


class RendezvousError(FerryError, ConnectionError):
    pass


class NotSupportedError(FerryError, NotImplementedError):
    pass


class NoMemoryError(FerryError, MemoryError):
    pass


class CallOrderError(FerryError, RuntimeError):
    pass


class BrokenError(FerryError, RuntimeError):
    pass


class ExpertOverflowError(FerryError, ValueError):
    pass


class NotFoundError(FerryError, LookupError):
    pass


class ExistsError(FerryError, ValueError):
    pass


class UnavailableError(FerryError, ConnectionError):
    pass


class NotReadableError(FerryError, PermissionError):
    pass


class ProviderError(FerryError):
    pass


class NotLeasedError(FerryError, LookupError):
    """An immediate value of the lease range that is not leased now: its
    lease was retired, or it was picked by hand."""


class NotifyTooLargeError(TooLargeError):
    """A notification payload over MAX_NOTIFY_PAYLOAD bytes."""


class NotificationsLostError(FerryError, LookupError):
    """Notifications to the lease were lost (a second engine sending to
    the same mailbox); raised once, in their place, by
    Lease.wait_notification, whose next call goes on with those after
    them. The message says how many."""


class LeasesExhaustedError(FerryError, RuntimeError):
    """No free run of lease values, or no free mailbox."""


class BusyError(FerryError):
    pass


class QueueFullError(FerryError):
    pass


class RemovedError(FerryError):
    pass


class AbandonedError(FerryError):
    pass


class UnknownRegionError(FerryError):
    pass


class InternalError(FerryError):
    pass


# The old name, kept so code written against the first package still runs.
TimeoutError_ = FerryTimeoutError

_BY_CODE: Dict[int, Type[FerryError]] = {
    _abi.E_INVALID: InvalidArgumentError,
    _abi.E_CLOSED: ClosedError,
    _abi.E_UNKNOWN_REGION: UnknownRegionError,
    _abi.E_OUT_OF_BOUNDS: OutOfBoundsError,
    _abi.E_NOT_SUPPORTED: NotSupportedError,
    _abi.E_TIMEOUT: FerryTimeoutError,
    _abi.E_PROVIDER: ProviderError,
    _abi.E_NIC_MISMATCH: NICMismatchError,
    _abi.E_BAD_ENCODING: BadEncodingError,
    _abi.E_NO_TRANSPORT: NotSupportedError,
    _abi.E_UNKNOWN_PROVIDER: UnknownTransportError,
    _abi.E_BUSY: BusyError,
    _abi.E_TOO_LARGE: TooLargeError,
    _abi.E_REMOVED: RemovedError,
    _abi.E_BAD_HANDLE: ClosedError,
    _abi.E_BUFFER_TOO_SMALL: InvalidArgumentError,
    _abi.E_RENDEZVOUS: RendezvousError,
    _abi.E_PEER_LOST: PeerLostError,
    _abi.E_STALE_DESCRIPTOR: StaleDescriptorError,
    _abi.E_NOT_LEASED: NotLeasedError,
    _abi.E_NOTIFY_TOO_LARGE: NotifyTooLargeError,
    _abi.E_LEASES_EXHAUSTED: LeasesExhaustedError,
    _abi.E_NOTIFICATIONS_LOST: NotificationsLostError,
    _abi.E_QUEUE_FULL: QueueFullError,
    _abi.E_ABANDONED: AbandonedError,
    _abi.E_NO_MEMORY: NoMemoryError,
    _abi.E_CALL_ORDER: CallOrderError,
    _abi.E_BROKEN: BrokenError,
    _abi.E_EXPERT_OVERFLOW: ExpertOverflowError,
    _abi.E_NOT_FOUND: NotFoundError,
    _abi.E_EXISTS: ExistsError,
    _abi.E_UNAVAILABLE: UnavailableError,
    _abi.E_NOT_READABLE: NotReadableError,
    _abi.E_INTERNAL: InternalError,
}


def error_for(code: int) -> Type[FerryError]:
    """The exception class of a FERRY_E_* code."""
    return _BY_CODE.get(code, FerryError)


def closed(what: str) -> ClosedError:
    """The error of a call on an object this process already closed."""
    return ClosedError(what, _abi.E_CLOSED, "FERRY_E_CLOSED", "%s is closed" % what)
