"""Parses a Prometheus text exposition (stdin) with Prometheus' own Python
client and prints the families as JSON, for test/metrics_test.rb: the
output is validated by a parser SolidJobs did not write. Non-finite values
are printed as strings ("+Inf", "NaN") since JSON has no such numbers."""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def number(value):
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


families = [
    {
        "name": family.name,
        "type": family.type,
        "help": family.documentation,
        "samples": [
            {"name": s.name, "labels": s.labels, "value": number(s.value)} for s in family.samples
        ],
    }
    for family in text_string_to_metric_families(sys.stdin.read())
]
json.dump(families, sys.stdout)
