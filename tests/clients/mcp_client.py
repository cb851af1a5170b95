#!/usr/bin/env python3
"""Drive `myelin mcp` with the official MCP Python SDK (`mcp`), unchanged, over stdio.

Usage:
    mcp_client.py --myelin BIN --store DIR

Starts `BIN --store DIR mcp --user-id sam`, negotiates, lists the tools and calls every one
(Myelin's names and OpenMemory's), concurrent calls, the cancellation of a long add, and bad
input; prints one line per check and exits 1 naming the first that fails.
"""
import argparse
import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Check  # noqa: E402

TOOLS = ["add_memory", "search_memory", "list_memories", "delete_memory", "add_memories", "delete_all_memories"]


def structured(result):
    if result.is_error:
        return None
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def session_checks(session, check):
    init = await session.initialize()
    check("initialize negotiates a revision the SDK speaks", bool(init.protocol_version), init)
    check("server info", init.server_info.name == "myelin", init.server_info)

    tools = await session.list_tools()
    names = [t.name for t in tools.tools]
    check("every tool listed", names == TOOLS, names)
    check("every tool has an output schema", all(t.output_schema for t in tools.tools), names)

    # Myelin's tools, with a scope.
    a = structured(await session.call_tool("add_memory", {"user_id": "u", "messages": [
        {"role": "user", "content": "I adopted a cat named Miso."},
        {"role": "user", "content": "The bakery on Elm Street sells rye bread on Fridays."}]}))
    check("add_memory", a is not None and len(a["results"]) == 2, a)
    miso = a["results"][0]["id"]
    s = structured(await session.call_tool("search_memory", {"user_id": "u", "query": "What is my cat called?", "top_k": 1}))
    check("search_memory best first", s["results"][0]["id"] == miso and "confidence" in s, s)
    t = structured(await session.call_tool("search_memory", {"user_id": "u", "query": "cat bread", "order": "time"}))
    check("search_memory in time order", [r["id"] for r in t["results"]] == [r["id"] for r in a["results"]], t)
    listed = structured(await session.call_tool("list_memories", {"user_id": "u"}))
    check("list_memories", [m["id"] for m in listed["results"]] == [r["id"] for r in a["results"]], listed)
    d = structured(await session.call_tool("delete_memory", {"id": miso}))
    check("delete_memory", d == {"deleted": miso}, d)

    # OpenMemory's tools, in the server's default scope (--user-id sam).
    a = structured(await session.call_tool("add_memories", {"text": "I play the cello in a quartet."}))
    check("add_memories", a["results"][0]["user_id"] == "sam", a)
    s = structured(await session.call_tool("search_memory", {"query": "Which instrument do I play?"}))
    check("search_memory in the default scope", s["results"][0]["memory"] == "I play the cello in a quartet.", s)
    listed = structured(await session.call_tool("list_memories", {}))
    check("list_memories in the default scope", len(listed["results"]) == 1, listed)

    # Metadata kept and filtered on; filters across scopes.
    a = structured(await session.call_tool("add_memory", {"user_id": "m", "metadata": {"topic": "music"},
                                                          "text": "I tune the cello before every rehearsal."}))
    check("add_memory with metadata", a["results"][0]["metadata"] == {"topic": "music"}, a)
    s = structured(await session.call_tool("search_memory", {"query": "cello", "filters": {
        "AND": [{"OR": [{"user_id": "m"}, {"user_id": "sam"}]}, {"metadata": {"topic": "music"}}]}}))
    check("search_memory with filters", [r["id"] for r in s["results"]] == [a["results"][0]["id"]], s)
    listed = structured(await session.call_tool("list_memories", {"filters": {"OR": [{"user_id": "m"}, {"user_id": "sam"}]}}))
    check("list_memories across scopes", len(listed["results"]) == 2, listed)
    # A scope's standing context: its instructions and preferences, by categories.
    rule = structured(await session.call_tool("add_memory", {"user_id": "m",
                                                             "text": "Always name the key when I ask about a piece."}))
    check("an instruction's categories", rule["results"][0]["categories"] == ["instruction"], rule)
    standing = structured(await session.call_tool("list_memories", {"filters": {
        "AND": [{"user_id": "m"}, {"categories": {"in": ["instruction", "preference"]}}]}}))
    check("list_memories by categories", [r["id"] for r in standing["results"]] == [rule["results"][0]["id"]], standing)
    d = structured(await session.call_tool("delete_memory", {"user_id": "m", "all": True}))
    check("delete the metadata scope", d == {"deleted": 2}, d)
    e = structured(await session.call_tool("add_memory", {"user_id": "x", "expiration_date": "2999-12-31",
                                                          "text": "My library card is valid for a decade."}))
    check("add_memory with expiration_date", e["results"][0]["expiration_date"] == "2999-12-31"
          and e["results"][0]["expires_at"].startswith("3000-01-01T00:00:00"), e)
    d = structured(await session.call_tool("delete_memory", {"user_id": "x", "all": True}))
    check("delete the expiry scope", d == {"deleted": 1}, d)

    # Concurrent calls: all answered, each its own.
    results = {}

    async def ask(i):
        results[i] = structured(await session.call_tool("search_memory", {"user_id": "u", "query": f"bread {i}"}))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(ask, i)
    check("eight concurrent searches answered", len(results) == 8 and all(r is not None for r in results.values()), results)

    # A long add does not hold up a ping; cancelled, it answers nothing and the server goes on.
    long_text = " ".join(f"Note {i}: the greenhouse vent was checked at dawn and found working." for i in range(3000))
    timing = {}

    async def long_add():
        with anyio.CancelScope() as scope:
            timing["scope"] = scope
            await session.call_tool("add_memory", {"user_id": "long", "text": long_text})
            timing["finished"] = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_add)
        await anyio.sleep(0.2)
        start = time.monotonic()
        await session.send_ping()
        timing["ping"] = time.monotonic() - start
        timing["scope"].cancel()
    check("a ping is answered while a long add runs", timing["ping"] < 2.0, timing)
    check("the cancelled add did not finish", "finished" not in timing, timing)
    p = await session.send_ping()
    check("the server goes on after a cancellation", p is not None, p)

    # Bad input: a tool error with the reason, not a protocol error.
    bad = await session.call_tool("search_memory", {"user_id": "u", "query": " "})
    check("an empty query is a tool error", bad.is_error and "empty query" in bad.content[0].text, bad)
    bad = await session.call_tool("search_memory", {"user_id": "u", "query": "q", "filters": {"OR": []}})
    check("a bad filter is named", bad.is_error and "filters.OR" in bad.content[0].text, bad)
    bad = await session.call_tool("no_such_tool", {})
    check("an unknown tool is a tool error", bad.is_error and "unknown tool" in bad.content[0].text, bad)

    d = structured(await session.call_tool("delete_all_memories", {}))
    check("delete_all_memories", d == {"deleted": 1}, d)
    d = structured(await session.call_tool("delete_memory", {"user_id": "u", "all": True}))
    check("delete_memory all", d == {"deleted": 1}, d)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--myelin", required=True)
    ap.add_argument("--store", required=True)
    args = ap.parse_args()
    check = Check()
    params = StdioServerParameters(command=args.myelin, args=["--quiet", "--store", args.store, "mcp", "--user-id", "sam"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session_checks(session, check)
    print(f"mcp SDK: {check.n} checks passed", flush=True)


if __name__ == "__main__":
    anyio.run(main)
