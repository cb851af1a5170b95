#!/usr/bin/env python3
"""Drive mem0's own Python client (mem0ai, unchanged) against a running `myelin serve`.

Usage:
    mem0_client.py --host http://127.0.0.1:PORT --api-key KEY

Runs every call of `MemoryClient` that Myelin answers and asserts on what comes back; prints
one line per call and exits 1 naming the first that fails. Works with mem0ai 2.x (the v3
routes) and 0.1.x (`version="v1"`/`"v2"`); the version is the one on the import path. What
Myelin does not keep (categories) is asserted to fail with the reason. AsyncMemoryClient is
driven through the same calls at the end.
"""
import argparse
import asyncio
import importlib.metadata
import os
import sys

os.environ.setdefault("MEM0_TELEMETRY", "False")  # no network: mem0's telemetry stays off

from mem0 import MemoryClient  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import Check  # noqa: E402


def mem0_version():
    """The version of the mem0ai on the import path (two may be installed side by side)."""
    import mem0

    path = os.path.dirname(os.path.dirname(mem0.__file__))
    for entry in os.listdir(path):
        if entry.startswith("mem0ai-") and entry.endswith(".dist-info"):
            return entry[len("mem0ai-"):-len(".dist-info")]
    return importlib.metadata.version("mem0ai")


def expect_error(check, name, fn, needle):
    try:
        fn()
    except Exception as e:  # the client's own exception classes differ between versions
        text = f"{e} {getattr(e, 'details', '')} {getattr(e, 'message', '')}"
        check(name, needle in text, f"error without {needle!r}: {text}")
        return
    check(name, False, "no error")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", required=True)
    ap.add_argument("--api-key", required=True)
    args = ap.parse_args()
    version = mem0_version()
    modern = not version.startswith("0.")
    print(f"mem0ai {version} against {args.host}", flush=True)
    check = Check()

    # A wrong key is refused with the server's reason, at construction (the ping).
    expect_error(check, "construct with a wrong key", lambda: MemoryClient(api_key="wrong", host=args.host), "token")
    client = MemoryClient(api_key=args.api_key, host=args.host)
    check("construct (GET /v1/ping/, Token auth)", client.org_id == "myelin" and client.project_id == "myelin",
          f"{client.org_id} {client.project_id}")

    user = f"alex-{version}"
    facts = [
        "I keep bees on the roof of my flat in Leeds.",
        "My sister Priya is a marine biologist in Plymouth.",
        "I am allergic to peanuts, so no satay for me.",
        "Last spring I ran the Edinburgh half marathon in 1:52.",
    ]
    added = []
    for fact in facts:
        if modern:
            a = client.add([{"role": "user", "content": fact}], user_id=user)
        else:
            a = client.add([{"role": "user", "content": fact}], user_id=user, output_format="v1.1")
        check("add", len(a["results"]) == 1 and a["results"][0]["event"] == "ADD"
              and a["results"][0]["memory"] == fact, a)
        check("add says it stores as given", "stored as given" in a.get("message", ""), a)
        added.append(a["results"][0]["id"])
    # A message with a name and a Unix time.
    a = client.add([{"role": "user", "content": "Tom's dog is a beagle mix.", "name": "Tom"}],
                   user_id=user, timestamp=1_714_000_000)
    tom = a["results"][0]
    check("add with name and Unix timestamp", tom["role"] == "Tom" and tom["created_at"].startswith("2024-04-24"), tom)
    added.append(tom["id"])

    # Search: best first, with top_k; the right memory is results[0].
    question = "Which city does my sister work in?"
    if modern:
        found = client.search(question, filters={"user_id": user}, top_k=3)
    else:
        found = client.search(question, version="v2", filters={"AND": [{"user_id": user}]}, top_k=3)
    results = found["results"]
    check("search top_k", len(results) <= 3 and len(results) > 0, found)
    check("search best first", results[0]["id"] == added[1], [r["memory"] for r in results])
    scores = [r["score"] for r in results]
    check("search scores descend", scores == sorted(scores, reverse=True), scores)
    check("search keeps Myelin's fields", "confidence" in found and "rejected" in found
          and found.get("timeline") is False, found)
    # A question that asks for a story is answered in time order, whatever the scores.
    story = "Can you summarize how my hobbies and family news progressed over time?"
    if modern:
        told = client.search(story, filters={"user_id": user}, top_k=4)
    else:
        told = client.search(story, version="v2", filters={"AND": [{"user_id": user}]}, top_k=4)
    when = [r["created_at"] for r in told["results"]]
    # Handed over in full when the gate trusts it, as its three closest (weak) when not.
    check("a timeline search says so and is in time order", told.get("timeline") is True
          and len(when) == (3 if told["rejected"] else 4) and when == sorted(when), told)
    # A question the memory was never told about: refused, with only the few closest, weak.
    never = "What is the capital of Australia?"
    if modern:
        refused = client.search(never, filters={"user_id": user}, top_k=10)
    else:
        refused = client.search(never, version="v2", filters={"AND": [{"user_id": user}]}, top_k=10)
    check("a question it was never told about is refused, the closest marked weak", refused["rejected"] is True
          and 0 < len(refused["results"]) <= 3 and all(r.get("weak") is True for r in refused["results"]), refused)
    check("an answer is not weak", all(r.get("weak") is False for r in found["results"]) or found["rejected"], found)
    if not modern:
        v1 = client.search(question, user_id=user, top_k=2)
        check("search v1", v1["results"][0]["id"] == added[1], v1)

    # get_all: mem0's page envelope (2.x, 0.1.x v2), or a list of results (0.1.x v1).
    if modern:
        page = client.get_all(filters={"user_id": user}, page=1, page_size=2)
    else:
        page = client.get_all(version="v2", filters={"user_id": user}, page=1, page_size=2)
    check("get_all count", page["count"] == len(added), page)
    check("get_all page", [m["id"] for m in page["results"]] == added[:2], page)
    check("get_all next", page["next"] is not None and "page=2" in page["next"], page)
    if modern:
        last = client.get_all(filters={"user_id": user}, page=3, page_size=2)
    else:
        last = client.get_all(version="v2", filters={"user_id": user}, page=3, page_size=2)
    check("get_all last page", [m["id"] for m in last["results"]] == added[4:] and last["next"] is None, last)
    if not modern:
        v1 = client.get_all(user_id=user)
        check("get_all v1", [m["id"] for m in v1["results"]] == added, v1)

    # get: mem0's item fields.
    item = client.get(added[0])
    check("get", item["memory"] == facts[0] and item["user_id"] == user, item)
    check("get has mem0's fields", all(k in item for k in ("created_at", "updated_at", "hash")), item)
    import hashlib
    check("hash is MD5 of the text", item["hash"] == hashlib.md5(facts[0].encode()).hexdigest(), item)

    # history: a list of mem0's records.
    history = client.history(added[0])
    check("history", isinstance(history, list) and history[0]["event"] == "ADD"
          and history[0]["new_memory"] == facts[0] and history[0]["user_id"] == user, history)

    # users (entities).
    users = client.users()
    mine = [e for e in users["results"] if e["name"] == user]
    check("users", len(mine) == 1 and mine[0]["type"] == "user" and mine[0]["total_memories"] == len(added), users)

    # update keeps the id, re-embeds (the new text is found, the old one is not), records UPDATE.
    new_text = "I keep bees on the roof of my allotment shed in York."
    u = client.update(added[0], text=new_text)
    check("update", u["id"] == added[0] and u["memory"] == new_text, u)
    check("get after update", client.get(added[0])["memory"] == new_text, client.get(added[0]))
    if modern:
        found = client.search("Where is the allotment shed?", filters={"user_id": user}, top_k=1)
    else:
        found = client.search("Where is the allotment shed?", version="v2", filters={"user_id": user}, top_k=1)
    check("search finds the new text", found["results"][0]["id"] == added[0], found)
    history = client.history(added[0])
    check("history records the update", [h["event"] for h in history] == ["ADD", "UPDATE"]
          and history[1]["new_memory"] == new_text, history)
    b = client.batch_update([{"memory_id": added[3], "text": "Last spring I ran the Edinburgh half in 1:49."}])
    check("batch_update", b["updated"] == [added[3]], b)
    check("get after batch_update", client.get(added[3])["memory"].endswith("1:49."), client.get(added[3]))

    # Metadata: kept, returned, filtered on (inside ranking), replaced by an update; OR filters
    # read across users.
    kim = f"kim-{version}"
    pets = {"topic": "pets", "stars": 5}
    m = client.add([{"role": "user", "content": "My cat Miso sleeps on the radiator."}], user_id=kim, metadata=pets)
    cat = m["results"][0]
    check("add with metadata", cat["metadata"] == pets, cat)
    client.add([{"role": "user", "content": "My cat food budget is ten pounds a week."}], user_id=kim,
               metadata={"topic": "money", "stars": 2})
    check("get returns metadata", client.get(cat["id"])["metadata"] == pets, client.get(cat["id"]))
    by_topic = {"AND": [{"user_id": kim}, {"metadata": {"topic": "pets"}}]}
    if modern:
        found = client.search("How much does the cat cost?", filters=by_topic, top_k=5)
    else:
        found = client.search("How much does the cat cost?", version="v2", filters=by_topic, top_k=5)
    check("search filtered by metadata", [r["id"] for r in found["results"]] == [cat["id"]], found)
    either = {"OR": [{"user_id": user}, {"user_id": kim}]}
    if modern:
        page = client.get_all(filters=either, page=1, page_size=50)
    else:
        page = client.get_all(version="v2", filters=either, page=1, page_size=50)
    check("get_all with OR across users", page["count"] == len(added) + 2
          and {r["user_id"] for r in page["results"]} == {user, kim}, page)
    stars = {"AND": [{"user_id": kim}, {"metadata": {"stars": {"gte": 3}}}]}
    if modern:
        page = client.get_all(filters=stars)
    else:
        page = client.get_all(version="v2", filters=stars)
    check("get_all with a metadata operator", [r["id"] for r in page["results"]] == [cat["id"]], page)
    u = client.update(cat["id"], metadata={"topic": "home"})
    check("update metadata alone", u["metadata"] == {"topic": "home"}
          and u["memory"] == "My cat Miso sleeps on the radiator.", u)
    # Categories: each memory's kind (instruction, preference, other), returned and filtered on;
    # the standing context for a system prompt is a listing of the first two.
    rule = client.add([{"role": "user", "content": "Always answer in metric units when I ask about distances."}],
                      user_id=kim)["results"][0]
    liking = client.add([{"role": "user", "content": "I prefer short answers with one example."}],
                        user_id=kim)["results"][0]
    check("categories of a fact", client.get(cat["id"])["categories"] == ["other"], client.get(cat["id"]))
    check("categories of an instruction", client.get(rule["id"])["categories"] == ["instruction"],
          client.get(rule["id"]))
    standing = {"AND": [{"user_id": kim}, {"categories": {"in": ["instruction", "preference"]}}]}
    if modern:
        page = client.get_all(filters=standing)
    else:
        page = client.get_all(version="v2", filters=standing)
    check("get_all filtered by categories", sorted(r["id"] for r in page["results"])
          == sorted([rule["id"], liking["id"]]) and {r["categories"][0] for r in page["results"]}
          == {"instruction", "preference"}, page)
    rules = {"AND": [{"user_id": kim}, {"categories": "instruction"}]}
    if modern:
        found = client.search("How far is the station?", filters=rules, top_k=5)
    else:
        found = client.search("How far is the station?", version="v2", filters=rules, top_k=5)
    check("search filtered by categories", [r["id"] for r in found["results"]] == [rule["id"]], found)
    expect_error(check, "an unknown category is refused naming it",
                 lambda: client.get_all(filters={"AND": [{"user_id": kim}, {"categories": {"in": ["x"]}}]})
                 if modern else client.get_all(version="v2", filters={"AND": [{"user_id": kim},
                                                                             {"categories": {"in": ["x"]}}]}),
                 "'x' is not a category")
    check("delete_all of the metadata user", client.delete_all(user_id=kim)["deleted"] == 4, kim)

    # Expiry: 2.x clients send mem0's expiration_date (the last day, UTC) on add and update,
    # and None to clear it.
    if modern:
        sam = f"sam-{version}"
        e = client.add([{"role": "user", "content": "My gym membership runs through the summer."}],
                       user_id=sam, expiration_date="2999-12-31")
        gym = e["results"][0]
        check("add with expiration_date", gym["expiration_date"] == "2999-12-31", gym)
        check("get returns expiration_date", client.get(gym["id"])["expiration_date"] == "2999-12-31",
              client.get(gym["id"]))
        u = client.update(gym["id"], expiration_date=None)
        check("update clears expiration_date", u["expiration_date"] is None and u["expires_at"] is None, u)
        u = client.update(gym["id"], expiration_date="2998-01-01")
        check("update sets expiration_date", u["expiration_date"] == "2998-01-01", u)
        expect_error(check, "a past expiration_date is refused",
                     lambda: client.add("My pass expired long ago.", user_id=sam, expiration_date="2001-01-01"),
                     "has passed")
        check("delete_all of the expiry user", client.delete_all(user_id=sam)["deleted"] == 1, sam)

    expect_error(check, "an unknown memory is not found", lambda: client.get("0" * 32), "no memory with id")

    # delete, batch_delete, delete_all, delete_users.
    d = client.delete(added[0])
    check("delete", "deleted" in d.get("message", "").lower(), d)
    expect_error(check, "a deleted memory is gone", lambda: client.get(added[0]), "no memory with id")
    history = client.history(added[0])
    check("history after delete", [h["event"] for h in history] == ["ADD", "UPDATE", "DELETE"], history)
    b = client.batch_delete([{"memory_id": added[1]}, {"memory_id": added[2]}])
    check("batch_delete", b["deleted"] == added[1:3], b)
    d = client.delete_all(user_id=user)
    check("delete_all", d["deleted"] == 2, d)
    if modern:
        left = client.get_all(filters={"user_id": user})
    else:
        left = client.get_all(version="v2", filters={"user_id": user})
    check("nothing left", left["count"] == 0 and left["results"] == [], left)

    other = f"sam-{version}"
    client.add([{"role": "user", "content": "I grow tomatoes."}], user_id=other)
    r = client.delete_users(user_id=other)
    check("delete_users", "deleted" in r["message"].lower(), r)
    check("delete_users emptied the user", all(e["name"] != other for e in client.users()["results"]), client.users())

    asyncio.run(async_calls(args, version, modern, check))
    print(f"mem0ai {version}: {check.n} checks passed", flush=True)


async def async_calls(args, version, modern, check):
    """The same calls through AsyncMemoryClient, which both generations have."""
    from mem0 import AsyncMemoryClient

    client = AsyncMemoryClient(api_key=args.api_key, host=args.host)
    user = f"ana-{version}"
    a = await client.add([{"role": "user", "content": "I cycle to work along the canal."}], user_id=user,
                         metadata={"via": "async"})
    item = a["results"][0]
    check("async add", item["metadata"] == {"via": "async"}, a)
    await client.add([{"role": "user", "content": "My flat has a green door."}], user_id=user)
    v2 = {} if modern else {"version": "v2"}
    found = await client.search("How do I get to work?", filters={"user_id": user}, top_k=1, **v2)
    check("async search", [r["id"] for r in found["results"]] == [item["id"]], found)
    page = await client.get_all(filters={"user_id": user}, **v2)
    check("async get_all", page["count"] == 2, page)
    check("async get", (await client.get(item["id"]))["memory"] == "I cycle to work along the canal.", item)
    u = await client.update(item["id"], text="I cycle to work along the river.")
    check("async update", u["memory"] == "I cycle to work along the river.", u)
    history = await client.history(item["id"])
    check("async history", [h["event"] for h in history] == ["ADD", "UPDATE"], history)
    d = await client.delete_all(user_id=user)
    check("async delete_all", d["deleted"] == 2, d)


if __name__ == "__main__":
    main()
