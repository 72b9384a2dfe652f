"""The Grafana dashboard of `resolvelab watch`, built with Grafana's own Foundation SDK.

    pip install 'grafana-foundation-sdk==1769699379!11.6.0'
    python3 deploy/grafana/dashboard.py > deploy/grafana/resolvelab-dashboard.json

Import the JSON in Grafana (Dashboards → New → Import) and pick the Prometheus that scrapes
`watch`. crates/watch/tests/prometheus.rs builds it again with the pinned SDK (the
shipped file must be its output) and runs every query on a real Prometheus.
"""

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, QueryVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

PROMETHEUS = DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'instance=~"$instance"'
# The families counted per nginx instance carry `nginx_instance` when one watch follows several
# (its own series do not: answer changes, lag); `.*` also matches a series without the label.
NGX = 'instance=~"$instance", nginx_instance=~"$nginx_instance"'


def query(expr, legend):
    return Dataquery().ref_id("A").expr(expr).legend_format(legend).datasource(PROMETHEUS)


def timeseries(title, description, unit, expr, legend, width=12):
    return (
        Timeseries()
        .title(title)
        .description(description)
        .datasource(PROMETHEUS)
        .unit(unit)
        .min(0)
        .height(8)
        .span(width)
        .with_target(query(expr, legend))
    )


def build():
    return (
        Dashboard("resolvelab watch: nginx 502s by cause")
        .uid("resolvelab-watch")
        .tags(["nginx", "dns", "resolvelab"])
        .refresh("30s")
        .time("now-6h", "now")
        .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
        .with_variable(
            QueryVariable("instance")
            .label("Instance")
            .datasource(PROMETHEUS)
            .query("label_values(resolvelab_build_info, instance)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
        .with_variable(
            QueryVariable("nginx_instance")
            .label("nginx")
            .datasource(PROMETHEUS)
            .query("label_values(resolvelab_requests_total, nginx_instance)")
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
        .with_row(Row("Failures by cause"))
        .with_panel(
            timeseries(
                "Failed requests by class",
                "502/504 and no live upstreams, by the failure class the checker gave them (counted when their incident closes).",
                "reqps",
                f"sum by (class) (rate(resolvelab_failed_requests_total{{{NGX}}}[$__rate_interval]))",
                "{{class}}",
            )
        )
        .with_panel(
            timeseries(
                "Open incidents",
                "Failures of incident windows still open, by upstream and class as classed so far.",
                "short",
                f"sum by (upstream, class) (resolvelab_open_incident_failures{{{NGX}}})",
                "{{upstream}} {{class}}",
            )
        )
        .with_panel(
            timeseries(
                "Failed requests by upstream",
                "Failures by upstream and class over the selected range.",
                "short",
                f"sum by (upstream, class) (increase(resolvelab_failed_requests_total{{{NGX}}}[$__range])) > 0",
                "{{upstream}} {{class}}",
            )
        )
        .with_panel(
            timeseries(
                "No live upstreams by hops",
                "1 hop: no peer at the first pick (NXDOMAIN, wipeout, zone); 2 hops: a retry refused (generation race, tries exhausted).",
                "reqps",
                f"sum by (hops) (rate(resolvelab_no_live_upstreams_total{{{NGX}}}[$__rate_interval]))",
                "{{hops}} hop(s)",
            )
        )
        .with_row(Row("Traffic and evidence"))
        .with_panel(
            timeseries(
                "Requests by upstream and status class",
                "Every request read from the access logs, by the upstream it went to (none: answered without one).",
                "reqps",
                f"sum by (upstream, status_class) (rate(resolvelab_requests_total{{{NGX}}}[$__rate_interval]))",
                "{{upstream}} {{status_class}}",
            )
        )
        .with_panel(
            timeseries(
                "Error-log lines by signature",
                "The error log's lines by the checker's signatures (resolver errors, connect failures, no live upstreams, …).",
                "short",
                f"sum by (signature) (rate(resolvelab_error_lines_total{{{NGX}}}[$__rate_interval]))",
                "{{signature}}",
            )
        )
        .with_panel(
            timeseries(
                "DNS answer changes",
                "Changes of a name's answer seen by the watcher.",
                "short",
                f"sum by (name) (increase(resolvelab_dns_answer_changes_total{{{SEL}}}[$__rate_interval]))",
                "{{name}}",
            )
        )
        .with_row(Row("The watcher"))
        .with_panel(
            Stat()
            .title("Lag")
            .description("From the newest request read to now: how far behind the logs the counts are.")
            .datasource(PROMETHEUS)
            .unit("s")
            .height(4)
            .span(6)
            .with_target(query(f"max(resolvelab_lag_seconds{{{SEL}}})", "lag"))
        )
        .with_panel(
            timeseries(
                "Lines read",
                "Lines by stream and result: malformed lines mean the log format does not match.",
                "short",
                f"sum by (stream, result) (rate(resolvelab_lines_total{{{NGX}}}[$__rate_interval]))",
                "{{stream}} {{result}}",
                width=18,
            )
        )
    )


if __name__ == "__main__":
    print(JSONEncoder(sort_keys=True, indent=2).encode(build().build()))
