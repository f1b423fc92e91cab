"""Subprocess for the crash tests: runs two validator rounds against a store, idempotently.

It announces each durable step on stdout ("step N") and then waits for a line on stdin, so the
test can ``kill -9`` it exactly between writes; "inside" is printed from within the transaction
that closes a round (the update generator runs inside it).
"""

from __future__ import annotations

import sys

from compute.store import PogResult, RoundAlreadyFinished, ScoreUpdate, ValidatorStore

MINERS = {0: "hk-a", 1: "hk-b", 2: "hk-c"}
SAMPLES = {1: {0: 10.0, 1: 0.0, 2: 4.0}, 2: {0: 10.0, 1: 6.0, 2: 0.0}}
ALPHA = 0.5


def pause(tag: str) -> None:
    print(tag, flush=True)
    if sys.stdin.readline() == "":
        sys.exit(0)


def run(path: str) -> None:
    store = ValidatorStore(path)
    store.sync_miners(MINERS.items())
    while store.rounds_finished() < 2:
        record = store.begin_round(block=100 * (store.rounds_finished() + 1))
        samples = SAMPLES[store.rounds_finished() + 1]
        for uid, sample in samples.items():
            if uid in store.tested_uids(record.round_id):
                continue
            store.record_result(PogResult(record.round_id, uid, MINERS[uid], ok=sample > 0, sample=sample))
            pause(f"step result r{record.round_id} u{uid}")
        previous = {uid: rec.score for uid, rec in store.scores().items()}

        def updates(samples=samples, previous=previous):
            for n, (uid, sample) in enumerate(samples.items()):
                if n == 1:
                    pause("inside")
                new = ALPHA * sample + (1 - ALPHA) * previous.get(uid, 0.0)
                yield ScoreUpdate(uid, MINERS[uid], new)

        try:
            store.finish_round(record.round_id, updates())
        except RoundAlreadyFinished:
            pass
        pause(f"step finish r{record.round_id}")
    store.close()
    print("done", flush=True)


if __name__ == "__main__":
    run(sys.argv[1])
