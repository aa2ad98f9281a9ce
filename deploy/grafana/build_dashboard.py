"""Build deploy/grafana/hoptrace.json with Grafana's own SDK
(grafana-foundation-sdk: typed builders generated from Grafana's schemas),
so the dashboard is shaped as Grafana defines it. Run from anywhere:

    python3 deploy/grafana/build_dashboard.py            # rewrite hoptrace.json
    python3 deploy/grafana/build_dashboard.py --check    # exit 1 if it differs

Every query names only metrics hoptrace exports (crates/metrics: sv::NAMES,
goose::NAMES, trace::NAMES, doctor::NAMES); crates/metrics/tests/dashboard.rs checks that, and that this
script reproduces the committed file.
"""
import json
import pathlib
import sys

from grafana_foundation_sdk.builders import dashboard, heatmap, prometheus, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef, DashboardCursorSync, VariableRefresh

OUT = pathlib.Path(__file__).with_name("hoptrace.json")
# The SDK version hoptrace.json was built with (scripts/setup.sh installs it).
SDK_VERSION = "1769699998!10.1.0"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
STREAMS = 'stream=~"$stream"'
BLOCKS = 'gocb_ref=~"$gocb_ref"'


def query(expr, legend="", fmt=None, instant=False):
    q = prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DS)
    if fmt:
        q = q.format(fmt)
    if instant:
        q = q.instant()
    return q


def latency_heatmap(title, metric, extra=""):
    sel = STREAMS + extra
    return (
        heatmap.Panel()
        .title(title)
        .datasource(DS)
        .with_target(query(f"sum by (le) (increase({metric}_bucket{{{sel}}}[$__rate_interval]))", "{{le}}", "heatmap"))
        .calculate(False)
        .y_axis(heatmap.YAxisConfig().unit("s"))
        .height(8)
        .span(12)
    )


def quantiles(title, metric, by, extra=""):
    sel = STREAMS + extra
    p = timeseries.Panel().title(title).datasource(DS).unit("s").height(8).span(12)
    for q in ("0.5", "0.99", "0.999"):
        p = p.with_target(
            query(
                f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{sel}}}[$__rate_interval])))",
                f"p{float(q) * 100:g} " + " ".join("{{" + b + "}}" for b in by.split(", ")),
            )
        )
    return p


def rate_panel(title, exprs, unit="short"):
    p = timeseries.Panel().title(title).datasource(DS).unit(unit).height(8).span(12)
    for expr, legend in exprs:
        p = p.with_target(query(expr, legend))
    return p


def build():
    d = (
        dashboard.Dashboard("hoptrace: SV latency and the kernel path")
        .uid("hoptrace")
        .description("hoptrace sv subscribe, goose subscribe and trace --metrics (docs/metrics.md)")
        .tags(["hoptrace", "iec61850", "latency"])
        .refresh("30s")
        .time("now-6h", "now")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .with_variable(dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(
            dashboard.QueryVariable("stream")
            .label("stream")
            .datasource(DS)
            .query("label_values(stream)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
        .with_variable(
            dashboard.QueryVariable("gocb_ref")
            .label("GOOSE control block")
            .datasource(DS)
            .query("label_values(gocb_ref)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
        .with_row(dashboard.Row("Sampled values (hoptrace sv subscribe)"))
        .with_panel(latency_heatmap("T4-T3 per sample (subscriber)", "hoptrace_sv_app_latency_seconds"))
        .with_panel(quantiles("End to end (T4 - refrTm), quantiles", "hoptrace_sv_end_to_end_latency_seconds", "stream"))
        .with_panel(
            rate_panel(
                "Samples lost, duplicated, reordered per second",
                [
                    (f"sum by (stream) (rate(hoptrace_sv_lost_total{{{STREAMS}}}[$__rate_interval]))", "lost {{stream}}"),
                    (f"sum by (stream) (rate(hoptrace_sv_duplicated_total{{{STREAMS}}}[$__rate_interval]))", "duplicated {{stream}}"),
                    (f"sum by (stream) (rate(hoptrace_sv_reordered_total{{{STREAMS}}}[$__rate_interval]))", "reordered {{stream}}"),
                ],
            )
        )
        .with_panel(
            rate_panel(
                "Samples received, malformed frames, kernel drops per second",
                [
                    (f"sum by (stream) (rate(hoptrace_sv_samples_total{{{STREAMS}}}[$__rate_interval]))", "samples {{stream}}"),
                    ("sum(rate(hoptrace_sv_malformed_frames_total[$__rate_interval]))", "malformed frames"),
                    ("sum(rate(hoptrace_sv_kernel_drops_total[$__rate_interval]))", "kernel drops"),
                ],
            )
        )
        .with_panel(
            rate_panel(
                "Configured streams (--scl, --config): present, unexpected, problems",
                [
                    ('sum(hoptrace_sv_configured_streams{state="expected"})', "expected"),
                    ('sum(hoptrace_sv_configured_streams{state="present"})', "present"),
                    ('sum(hoptrace_sv_configured_streams{state="unexpected"})', "unexpected"),
                    ("sum by (stream, problem) (hoptrace_sv_stream_problems)", "{{stream}}: {{problem}}"),
                ],
            ).span(24)
        )
        .with_row(dashboard.Row("GOOSE (hoptrace goose subscribe)"))
        .with_panel(
            heatmap.Panel()
            .title("State change transfer time (first message of each state: receive - T)")
            .datasource(DS)
            .with_target(
                query(
                    f"sum by (le) (increase(hoptrace_goose_transfer_time_seconds_bucket{{{BLOCKS}}}[$__rate_interval]))",
                    "{{le}}",
                    "heatmap",
                )
            )
            .calculate(False)
            .y_axis(heatmap.YAxisConfig().unit("s"))
            .height(8)
            .span(12)
        )
        .with_panel(
            rate_panel(
                "Supervision: TAL expired, changes missed, stNum backwards, TAL 0 (per minute)",
                [
                    (f"sum by (gocb_ref) (increase(hoptrace_goose_{m}_total{{{BLOCKS}}}[1m]))", f"{label} {{{{gocb_ref}}}}")
                    for m, label in [
                        ("tal_expired", "TAL expired"),
                        ("missed_changes", "changes missed"),
                        ("st_num_backwards", "stNum backwards"),
                        ("zero_tal", "TAL 0"),
                    ]
                ],
            )
        )
        .with_panel(
            rate_panel(
                "Messages per second: state changes, retransmissions, lost, duplicated, out of order, malformed frames",
                [
                    (f"sum by (gocb_ref) (rate(hoptrace_goose_{m}_total{{{BLOCKS}}}[$__rate_interval]))", f"{label} {{{{gocb_ref}}}}")
                    for m, label in [
                        ("messages", "messages"),
                        ("state_changes", "state changes"),
                        ("retransmissions", "retransmissions"),
                        ("lost", "lost"),
                        ("duplicated", "duplicated"),
                        ("out_of_order", "out of order"),
                    ]
                ]
                + [("sum(rate(hoptrace_goose_malformed_frames_total[$__rate_interval]))", "malformed frames")],
            )
        )
        .with_panel(
            rate_panel(
                "stNum per control block (a step is a state change)",
                [(f"max by (gocb_ref) (hoptrace_goose_st_num{{{BLOCKS}}})", "{{gocb_ref}}")],
            )
        )
        .with_row(dashboard.Row("Kernel path (hoptrace trace)"))
        .with_panel(latency_heatmap("End to end through the host", "hoptrace_trace_stage_latency_seconds", ',stage="end_to_end"'))
        .with_panel(quantiles("p50 / p99 / p99.9 per stage", "hoptrace_trace_stage_latency_seconds", "stage"))
        .with_panel(
            rate_panel(
                "Spikes per minute, per stage and threshold",
                [
                    (
                        f"sum by (stage, above) (increase(hoptrace_trace_spikes_total{{{STREAMS}}}[1m]))",
                        "{{stage}} > {{above}}",
                    )
                ],
            )
        )
        .with_panel(
            rate_panel(
                "Tracer: packets per second by status, lost events",
                [
                    (f"sum by (status) (rate(hoptrace_trace_timelines_total{{{STREAMS}}}[$__rate_interval]))", "{{status}}"),
                    ("sum(rate(hoptrace_trace_lost_events_total[$__rate_interval]))", "lost events"),
                    ("sum(rate(hoptrace_trace_explained_stages_total[$__rate_interval]))", "explained stages"),
                ],
            )
        )
        .with_panel(
            rate_panel(
                "Host checks (hoptrace doctor, at the start of each run): failed by severity",
                [
                    ("sum by (severity) (hoptrace_doctor_failed_checks)", "failed {{severity}}"),
                    ('sum(hoptrace_doctor_checks{status="unknown"})', "could not be read"),
                ],
            ).span(24)
        )
        .with_panel(
            table.Panel()
            .title("Top culprits of explained spikes (time inside late stages, over the range)")
            .datasource(DS)
            .unit("s")
            .with_target(
                query(
                    "topk(10, sum by (kind, name) (increase(hoptrace_trace_culprit_seconds_total[$__range])))",
                    "{{kind}} {{name}}",
                    "table",
                    instant=True,
                )
            )
            .height(8)
            .span(24)
        )
    )
    return d.build()


def render():
    return json.dumps(build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def schema_roundtrip(data):
    """The committed JSON read back through the SDK's dashboard model and
    written again: a field the schema does not know would be dropped."""
    from grafana_foundation_sdk.models.dashboard import Dashboard

    return json.loads(json.dumps(Dashboard.from_json(data), cls=JSONEncoder))


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            import importlib.metadata

            have = importlib.metadata.version("grafana-foundation-sdk")
            print(
                f"{OUT} differs from what build_dashboard.py builds: run it"
                f" (built with grafana-foundation-sdk {SDK_VERSION}, this machine has {have})",
                file=sys.stderr,
            )
            sys.exit(1)
        data = json.loads(text)
        if schema_roundtrip(data) != data:
            print(f"{OUT} does not read back through Grafana's dashboard model unchanged", file=sys.stderr)
            sys.exit(1)
        print(f"{OUT}: as built, and read back unchanged through Grafana's dashboard model")
    else:
        OUT.write_text(text)
