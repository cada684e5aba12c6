#!/usr/bin/python3
"""metrics_test.py: parse a /metrics text with the Prometheus Python
client's parser and compare values with expectations given as arguments.

  metrics_test.py FILE 'NAME{LABEL="V"}=VALUE' 'NAME>=VALUE' ...

Prints one PASS:/FAIL: line per expectation (TEST:metric:...); exit 1 when
the text cannot be parsed."""
import re
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    test, path, wants = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(path) as f:
        text = f.read()
    values = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join('%s="%s"' % kv for kv in sorted(s.labels.items()))
                values["%s{%s}" % (s.name, labels) if labels else s.name] = s.value
    except ValueError as e:
        print("FAIL: %s:parse (%s)" % (test, e))
        return 1
    print("PASS: %s:parse (%d samples)" % (test, len(values)))
    for want in wants:
        m = re.fullmatch(r"(.+?)(>=|=)([0-9.e+-]+)", want)
        name, op, expected = m.group(1), m.group(2), float(m.group(3))
        got = values.get(name)
        ok = got is not None and (got == expected if op == "=" else got >= expected)
        print("%s: %s:%s%s" % ("PASS" if ok else "FAIL", test, want,
                               "" if ok else " (got %s)" % got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
