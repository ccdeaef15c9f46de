"""The budget of answers TrustGraph sockets hold unsent: per client address and per process, admitted one
request of a client at a time, waited for, and given back when an answer closes
(``server.http.socket_budget``)."""
from __future__ import annotations

import asyncio

from server.http.socket_budget import AnswerBudget, Holding


def drain(budget: AnswerBudget, holding: Holding, *pieces: bytes) -> None:
    """Pass ``pieces`` through the budget, as an answer's frames take them out of the app."""
    assert list(budget.counted(iter(pieces), holding)) == list(pieces)


async def admitted(budget: AnswerBudget, client: str, reserve: bool = True) -> bool:
    async with budget.admission(client, reserve) as admitted:
        return admitted


def test_a_client_over_its_budget_waits_and_others_do_not() -> None:
    async def run() -> None:
        budget = AnswerBudget(process_bytes=1000, client_bytes=100, wait_s=0.2)
        heavy = Holding("10.0.0.1")
        drain(budget, heavy, b"x" * 60, b"x" * 60)  # one answer may pass the budget: it is known once made
        assert budget.held == 120
        assert not await admitted(budget, "10.0.0.1")  # waited 0.2 s, still over
        assert await admitted(budget, "10.0.0.2")  # another client is not held up
        waiting = asyncio.create_task(admitted(budget, "10.0.0.1"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await budget.release(heavy)  # the answer is closed: the waiting request goes on
        assert await waiting and budget.held == 0 and budget.by_client == {}
    asyncio.run(run())


def test_a_client_s_requests_are_admitted_one_at_a_time() -> None:
    async def run() -> None:
        budget = AnswerBudget(process_bytes=1000, client_bytes=100, wait_s=0.2)
        async with budget.admission("a") as first:
            assert first
            assert not await admitted(budget, "a")  # its own next request waits while the first is made
            assert await admitted(budget, "b")
        assert await admitted(budget, "a") and budget._admitting == {}
    asyncio.run(run())


def test_the_process_budget_holds_every_client_back_and_releases_add_up() -> None:
    async def run() -> None:
        budget = AnswerBudget(process_bytes=100, client_bytes=80, wait_s=0.1)
        first, second = Holding("a"), Holding("b")
        drain(budget, first, b"x" * 50)
        drain(budget, second, b"x" * 50)
        assert not await admitted(budget, "c")  # no client holds its own budget, but all together the process's
        await budget.release(first)
        assert await admitted(budget, "c") and budget.held == 50 and budget.by_client == {"b": 50}
        await budget.release(second)
        await budget.release(second)  # an answer released twice gives nothing back twice
        assert budget.held == 0 and budget.by_client == {}
    asyncio.run(run())


def test_many_clients_admitted_at_once_cannot_all_pass_the_process_budget() -> None:
    async def run() -> None:
        budget = AnswerBudget(process_bytes=100, client_bytes=80, wait_s=0.2)
        async with budget.admission("a") as first, budget.admission("b") as second:
            assert first and second  # the second passes on the first's reservation: one answer past the budget
            assert not await admitted(budget, "c")  # neither answer is counted yet, and both may be large
            assert await admitted(budget, "c", reserve=False)  # a small answer (a RAG one) reserves nothing
        assert budget.reserved == 0 and await admitted(budget, "c")
    asyncio.run(run())


def test_request_frames_waiting_are_bounded_per_client_and_given_back() -> None:
    from server.http.socket_budget import CLIENT_REQUEST_BYTES

    budget = AnswerBudget(process_bytes=1000, client_bytes=100, wait_s=0.1)
    megabyte = 1 << 20
    taken = 0
    while budget.take_request("a", megabyte):
        taken += 1
    assert taken == CLIENT_REQUEST_BYTES // megabyte and budget.take_request("b", megabyte)  # others go on
    for _ in range(taken):
        budget.give_request("a", megabyte)
    budget.give_request("b", megabyte)
    assert budget.requests == 0 and budget.requests_by_client == {} and budget.take_request("a", megabyte)
