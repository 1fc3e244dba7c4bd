#!/usr/bin/python3
# Parses a Prometheus text exposition with the official Python client's parser (Debian
# python3-prometheus-client) and prints it as JSON: {family: {"type", "samples": [{"name",
# "labels", "value"}]}}. A malformed exposition makes the parser raise: exit status 1.
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

families = {}
for family in text_string_to_metric_families(open(sys.argv[1], encoding="utf-8").read()):
    families[family.name] = {
        "type": family.type,
        "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples],
    }
json.dump(families, sys.stdout)
sys.stdout.write("\n")
