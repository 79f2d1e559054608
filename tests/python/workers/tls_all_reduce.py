"""One member of a 2-member cluster over TCP with `tls` (argv[1]) on its data links, host
label argv[2], join timeout argv[3] s: an all-reduce of 256 KiB, checked. Prints RESULT
{"ok", "error"}: the sum's verdict, or the error a member whose --tls disagrees with the
other's gets."""

import json
import sys

import numpy

import tributary


def main():
    mode, host, join_timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    result = {"ok": False, "error": None}
    try:
        # Distinct host labels and TCP: the pair does not take shared memory, so TLS applies.
        w = tributary.Worker(tls=mode, transport="tcp", host=host, join_timeout=join_timeout,
                             recovery_timeout=4)
        try:
            x = numpy.full(1 << 16, w.rank + 1, dtype=numpy.float32)
            w.all_reduce(x)
            result["ok"] = bool(numpy.all(x == sum(range(1, w.size + 1))))
        finally:
            w.leave()
    except tributary.Error as e:
        result["error"] = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
