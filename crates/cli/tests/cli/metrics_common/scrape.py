"""Scrape http://127.0.0.1:PORT/metrics and parse it with the Prometheus
client library's OpenMetrics parser (a strict, maintained parser: a
malformed exposition raises). Prints {"content_type", "samples": {name:
[{"labels", "value"}]}} as JSON. Run inside the test's network namespace."""
import json
import sys
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

port = int(sys.argv[1])
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
    content_type = r.headers.get("Content-Type")
    body = r.read().decode()
samples = {}
for family in text_string_to_metric_families(body):
    for s in family.samples:
        samples.setdefault(s.name, []).append({"labels": s.labels, "value": s.value})
print(json.dumps({"content_type": content_type, "samples": samples}))
