#!/usr/bin/env python3
"""What PostgreSQL ran, from the statement log of a bench run.

    mkdir -p /tmp/pglog && chmod 777 /tmp/pglog   # writable by the server's user
    TEST_POSTGRES_STATEMENT_LOG=/tmp/pglog REPLICAS_BENCH_THROUGHPUT_ONLY=1 \
        cargo bench -p service-runtime --bench replicas -- postgres
    python3 runtime/server/benches/shared/statements.py /tmp/pglog 500

Prints the statements run
per event (the second argument: how many the run sent) and, per statement (literals and
numbers folded), how often it ran and its total time (lock waits included), longest first.
"""

import collections
import glob
import itertools
import re
import sys

folder, events = sys.argv[1], int(sys.argv[2])
counts, times = collections.Counter(), collections.Counter()
# A logged statement: "duration: 0.011 ms  execute s1: SELECT ..." (bind and parse have their
# own lines and durations; BEGIN and COMMIT come as "statement: ...").
LINE = re.compile(r".*duration: ([\d.]+) ms\s+(execute [^:]*|statement|bind [^:]*|parse [^:]*):\s*(.*)")


def fold(sql):
    sql = re.sub(r"\s+", " ", sql)
    sql = re.sub(r"'[^']*'", "?", sql)
    return re.sub(r"\b\d+\b", "N", sql)[:110]


def take(entry):
    found = LINE.match(entry or "")
    if not found:
        return
    ms, kind, sql = float(found.group(1)), found.group(2), fold(found.group(3))
    times[sql] += ms
    if kind.startswith("execute") or kind == "statement":
        counts[sql] += 1


entry = None
logs = sorted(glob.glob(f"{folder}/*.log"))
for line in itertools.chain.from_iterable(open(log) for log in logs):
    if re.match(r"^\d{4}-\d\d-\d\d ", line):
        take(entry)
        entry = line.strip()
    elif entry is not None:
        entry += " " + line.strip()
take(entry)
print(f"{sum(counts.values()) / events:.1f} statements per event")
for sql, ms in times.most_common(40):
    print(f"{ms:9.1f} ms {counts[sql]:7d}  {sql}")
