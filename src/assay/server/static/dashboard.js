/* Assay dashboard charts. Data comes from the page's <script type="application/json"
   id="page-data"> block (written server-side with |tojson) and is only ever parsed as
   JSON; text that reaches Plotly is entity-escaped, nothing is inserted as HTML. */
(function () {
  "use strict";

  function pageData() {
    var node = document.getElementById("page-data");
    return node ? JSON.parse(node.textContent) : null;
  }

  // Plotly renders a small subset of HTML in labels; stored names are untrusted.
  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  var CONFIG = { displaylogo: false, responsive: true };
  var BASE_LAYOUT = {
    margin: { l: 56, r: 16, t: 40, b: 48 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    font: { family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12 },
    hovermode: "x unified",
  };

  function layout(extra) {
    var out = {};
    Object.keys(BASE_LAYOUT).forEach(function (k) { out[k] = BASE_LAYOUT[k]; });
    Object.keys(extra).forEach(function (k) { out[k] = extra[k]; });
    return out;
  }

  function empty(el, message) {
    el.classList.add("chart-empty");
    el.textContent = message;
  }

  function historyCharts(data) {
    var tests = data.history.tests;
    var x = tests.map(function (t) { return t.bucket; });
    var pass = document.getElementById("chart-pass-rate");
    var dur = document.getElementById("chart-duration");
    if (!tests.length) {
      empty(pass, "No tests in this window.");
      empty(dur, "No tests in this window.");
    } else {
      Plotly.newPlot(pass, [{
        x: x, y: tests.map(function (t) { return t.pass_rate; }), type: "scatter",
        mode: "lines+markers", name: "pass rate", line: { color: "#2f7d4f" },
        hovertemplate: "%{y:.1f}%<extra>pass rate</extra>",
      }], layout({ title: { text: "Pass rate per hour (%)" }, yaxis: { range: [0, 105] } }), CONFIG);
      Plotly.newPlot(dur, [{
        x: x, y: tests.map(function (t) { return t.avg_duration; }), type: "bar",
        name: "avg duration", marker: { color: "#4a6fa5" },
        hovertemplate: "%{y:.2f} s<extra>avg duration</extra>",
      }], layout({ title: { text: "Average duration per hour (s)" } }), CONFIG);
    }
    var names = Object.keys(data.history.metrics).sort();
    var isPct = function (name) {
      var unit = data.units[name] || "ratio";
      return unit === "ratio" || unit === "bool";
    };
    metricLines(document.getElementById("chart-metrics"), data, names.filter(isPct),
      "Ratio metrics per hour (%)", "No ratio metric values in this window.");
    metricLines(document.getElementById("chart-performance"), data,
      names.filter(function (n) { return !isPct(n); }),
      "Performance metrics per hour (their units)", "No performance metric values in this window.");
  }

  function metricLines(el, data, names, title, emptyText) {
    if (!names.length) {
      empty(el, emptyText);
      return;
    }
    var traces = names.map(function (name) {
      var points = data.history.metrics[name];
      var unit = data.units[name] || "ratio";
      var suffix = unit === "ratio" || unit === "bool" ? "%" : " " + esc(unit);
      return {
        x: points.map(function (p) { return p.bucket; }),
        y: points.map(function (p) { return p.display; }),
        type: "scatter", mode: "lines+markers", name: esc(name) + (suffix === "%" ? "" : " (" + esc(unit) + ")"),
        hovertemplate: "%{y:.2f}" + suffix + "<extra>" + esc(name) + "</extra>",
      };
    });
    Plotly.newPlot(el, traces, layout({
      title: { text: title },
      legend: { orientation: "h", y: -0.2 },
      margin: { l: 56, r: 16, t: 40, b: 80 },
    }), CONFIG);
  }

  function compareChart(data) {
    var el = document.getElementById("chart-compare");
    if (!el) return;
    if (!data.rows.length) {
      empty(el, "No ratio metrics to chart.");
      return;
    }
    var x = data.rows.map(function (r) { return esc(r.metric); });
    Plotly.newPlot(el, [
      { x: x, y: data.rows.map(function (r) { return r.a; }), type: "bar", name: "A: " + esc(data.labels[0]), marker: { color: "#9aa9bd" } },
      { x: x, y: data.rows.map(function (r) { return r.b; }), type: "bar", name: "B: " + esc(data.labels[1]), marker: { color: "#2f6fb0" } },
    ], layout({ barmode: "group", title: { text: "Means (%)" }, hovermode: "closest", legend: { orientation: "h", y: -0.25 } }), CONFIG);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var data = pageData();
    if (!data || typeof Plotly === "undefined") return;
    if (document.getElementById("chart-pass-rate")) historyCharts(data);
    if (document.getElementById("chart-compare")) compareChart(data);
    document.body.setAttribute("data-charts", "ready");
  });
})();
