"""The coroutines behind ``get_async`` and ``put_async`` (see ``crates/stampede-py/src/aio.rs``).

Cancellation-safe by construction: an item is taken (or stored) only by a non-waiting attempt
that runs here, on the event loop's thread, and is returned at once — no ``await`` lies between
taking an item and handing it to the caller. What the coroutine awaits is a wake-up registered
*before* the attempt, which carries no item; a coroutine cancelled or timed out there has taken
nothing and stored nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any


def _wake(future: asyncio.Future[None]) -> None:
    """Completes a wake-up future (called in the loop's thread by the runtime)."""
    if not future.done():
        future.set_result(None)


async def get(pending: Any, timeout: float | None) -> Any:
    """Repeats ``pending.attempt(False)`` (``None``: not yet; raises when it fails for good) until
    it returns an item, awaiting a fresh ``pending.readiness()`` between attempts. Once
    ``timeout`` seconds have passed, ``pending.attempt(True)`` raises the "not yet" error itself
    (``NotAvailable`` with its neighbours, or ``Full``), as the blocking form would."""
    done = pending.attempt(False)
    if done is not None:
        return done
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        ready = pending.readiness()
        try:
            done = pending.attempt(False)
            if done is not None:
                return done
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return pending.attempt(True)
            woken = ready.wait(loop, _wake)
            if left is None:
                await woken
            else:
                try:
                    await asyncio.wait_for(woken, left)
                except asyncio.TimeoutError:
                    pass
        finally:
            ready.close()


async def put(pending: Any, timeout: float | None) -> None:
    """As ``get``, for a put (whose attempt returns ``True`` once the item is stored)."""
    await get(pending, timeout)
