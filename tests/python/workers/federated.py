"""One member of a 3-member cluster running federated rounds through tributary.Worker:
rank r contributes x = r + 1 everywhere with weight r + 1. Round 1: the last rank sleeps past
the deadline (late, folded); round 2: everyone, the late update folded in; round 3: more
participants required than there are members. Prints RESULT with what each round returned."""

import json
import time

import numpy

import tributary


def main():
    w = tributary.Worker()
    me, n = w.rank, w.size
    late_rank = n - 1
    result = {"rank": me, "size": n, "member_id": w.member_id, "rounds": []}

    def run(round_no, deadline, min_participants=1, sleep=0.0):
        x = numpy.full(1000, me + 1, dtype=numpy.float32)
        if sleep:
            time.sleep(sleep)
        entry = {"round": round_no}
        try:
            out = w.federated_round(x, round=round_no, weight=me + 1, deadline=deadline,
                                    min_participants=min_participants, late="fold",
                                    tensor_id=7)
            entry.update(contributed=out.contributed, total_weight=out.total_weight,
                         weights=[wt for _, wt in out.contributors],
                         ids=[i for i, _ in out.contributors],
                         values=sorted(set(x.tolist())))
        except tributary.Error as e:
            entry.update(error=f"{type(e).__name__}: {e}", values=sorted(set(x.tolist())))
        result["rounds"].append(entry)

    run(1, deadline=3.0, sleep=6.0 if me == late_rank else 0.0)
    run(2, deadline=30.0)
    run(3, deadline=30.0, min_participants=n + 1)
    w.leave()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
