#!/usr/bin/env python3
"""Cut every conversation of a LoCoMo file into its sessions, each a conversation of its own
(`{sample_id}@s{k}`, the session's turns and date only), for the learned gate's small scopes.

    python3 scripts/locomo-sessions.py LOCOMO_FILE OUT.json
    myelin train-gate LOCOMO_FILE OUT.json BEAM_DIR --out models/gate/knowing.json

A session keeps the questions whose evidence all lies in it (their category kept, adversarial
ones too); a question with evidence in several sessions, or none, is left out. `train-gate`
folds a session with the conversation it was cut from (the id before `@`), and asks each kept
answerable question of the next session as well, where the memory was never told it (unless
the speakers said it again there: the labels carry that noise).
"""
import json
import re
import sys


def main():
    source, out = sys.argv[1], sys.argv[2]
    samples = json.load(open(source))
    cut = []
    for s in samples:
        conversation = s["conversation"]
        sessions = sorted(int(m.group(1)) for k in conversation if (m := re.fullmatch(r"session_(\d+)", k)))
        for k in sessions:
            turns = conversation[f"session_{k}"]
            if not turns:
                continue
            ids = {t["dia_id"] for t in turns}
            qa = [q for q in s["qa"] if q.get("evidence") and all(e in ids for e in q["evidence"])]
            part = {"speaker_a": conversation["speaker_a"], "speaker_b": conversation["speaker_b"],
                    f"session_{k}_date_time": conversation[f"session_{k}_date_time"], f"session_{k}": turns}
            cut.append({"sample_id": f"{s['sample_id']}@s{k}", "conversation": part, "qa": qa})
    json.dump(cut, open(out, "w"), indent=1)
    questions = sum(len(c["qa"]) for c in cut)
    print(f"{len(cut)} sessions of {len(samples)} conversations, {questions} questions kept -> {out}")


main()
