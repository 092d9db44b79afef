// The console's only script: it draws every element with a data-chart
// attribute (see charts.go) with uPlot, and marks it data-drawn="true";
// and it sends the user page's Enqueue form to POST /api/messages as JSON,
// showing the answer.
"use strict";

(function () {
  function fmtCount(v) {
    if (v == null) return "";
    return Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en-US") : String(Math.round(v * 100) / 100);
  }

  // Instants are shown in UTC, 24-hour, as the pages' text shows them.
  function fmtTime(v) {
    return v == null ? "" : new Date(v * 1000).toISOString().slice(0, 16).replace("T", " ");
  }

  function fmtDay(v) {
    return v == null ? "" : new Date(v * 1000).toISOString().slice(0, 10);
  }

  // The time axis's labels at each tick spacing, 24-hour (uPlot's own
  // default writes 12-hour "3pm"): [spacing, label, then the second line
  // where the year, month, day, hour or minute changes, mode 1].
  var axis24 = [
    [3600 * 24 * 365, "{YYYY}", null, null, null, null, null, null, 1],
    [3600 * 24 * 28, "{MMM}", "\n{YYYY}", null, null, null, null, null, 1],
    [3600 * 24, "{MM}-{DD}", "\n{YYYY}", null, null, null, null, null, 1],
    [3600, "{HH}:{mm}", "\n{YYYY}-{MM}-{DD}", null, "\n{MM}-{DD}", null, null, null, 1],
    [60, "{HH}:{mm}", "\n{YYYY}-{MM}-{DD}", null, "\n{MM}-{DD}", null, null, null, 1],
    [1, ":{ss}", "\n{YYYY}-{MM}-{DD} {HH}:{mm}", null, "\n{MM}-{DD} {HH}:{mm}", null, "\n{HH}:{mm}", null, 1],
  ];

  // The index of series si's last value, the one its legend shows while
  // the cursor is off the chart.
  function lastIndex(data, si) {
    var vals = data[si];
    for (var i = vals.length - 1; i >= 0; i--) {
      if (vals[i] != null) return i;
    }
    return null;
  }

  // Stacked areas and bars: series i (of those on the left axis) becomes
  // the sum of series i..n, drawn first to last, so each one's fill shows
  // as the band above the next.
  function stack(data, spec) {
    var out = data.slice();
    var sums = data[0].map(function () { return 0; });
    for (var i = data.length - 1; i >= 1; i--) {
      if (spec.series[i - 1].axis === "y2") continue;
      sums = sums.map(function (s, j) { return s + (data[i][j] || 0); });
      out[i] = sums.slice();
    }
    return out;
  }

  function draw(el) {
    var spec = JSON.parse(el.dataset.chart);
    if (!spec.x || spec.x.length === 0) {
      el.textContent = "Nothing to draw yet.";
      el.dataset.drawn = "empty";
      return;
    }
    var kind = spec.kind;
    var data = [spec.x].concat(spec.series.map(function (s) { return s.values; }));
    var raw = data;
    var stacked = kind === "stacked" || kind === "stackedbars";
    if (stacked) data = stack(data, spec);
    var barPaths = uPlot.paths.bars({ size: [0.7, 80] });
    // Off the chart, the legend shows each series' last value (and the x
    // of the last point) instead of nothing.
    var xValue = spec.numbered ? function (v) { return v == null ? "" : String(v); } : spec.weekly ? fmtDay : fmtTime;
    var series = [{
      label: spec.numbered ? spec.x_label || "x" : spec.weekly ? "week of" : "time (UTC)",
      value: function (u, v, si, idx) {
        if (idx == null) v = spec.x[spec.x.length - 1];
        return xValue(v);
      },
    }];
    spec.series.forEach(function (s, i) {
      var one = {
        label: s.label,
        stroke: s.color,
        width: kind === "bars" || kind === "stackedbars" ? 0 : 2,
        scale: s.axis === "y2" ? "y2" : "y",
        spanGaps: !!s.span_gaps,
        value: function (u, v, si, idx) {
          if (idx == null) {
            idx = lastIndex(raw, i + 1);
            if (idx == null) return "";
            v = data[i + 1][idx];
          }
          if (s.axis === "y2" && s.percent) return v == null ? "" : Math.round(v * 1000) / 10 + "%";
          return fmtCount(stacked ? raw[i + 1][idx] : v);
        },
        points: { show: kind === "line" || s.axis === "y2" },
      };
      if (s.dashed) one.dash = [6, 4];
      if (s.axis === "y2") {
        one.width = 2;
      } else if (kind === "bars" || kind === "stackedbars") {
        one.fill = s.color;
        one.paths = barPaths;
      } else if (kind === "stacked") {
        one.fill = s.color + "cc";
      }
      series.push(one);
    });
    var xAxis = {};
    if (spec.numbered) {
      xAxis = { label: spec.x_label || "", values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? String(v) : ""; }); } };
    } else if (spec.weekly) {
      // A tick on each cohort's Monday, whatever uPlot's spacing would be.
      xAxis = { label: "week of (Monday, UTC)", splits: function () { return spec.x; }, values: function (u, vals) { return vals.map(fmtDay); } };
    } else {
      xAxis = { values: axis24 };
    }
    var axes = [
      xAxis,
      { label: spec.unit, size: 70, values: function (u, vals) { return vals.map(fmtCount); } },
    ];
    var scales = { x: { time: !spec.numbered }, y: { range: function (u, min, max) { return [0, Math.max(1, max) * 1.08]; } } };
    if (spec.series.some(function (s) { return s.axis === "y2"; })) {
      var pct = spec.series.some(function (s) { return s.percent; });
      axes.push({ side: 1, scale: "y2", grid: { show: false }, size: 70, values: function (u, vals) {
        return vals.map(function (v) { return pct ? Math.round(v * 100) + "%" : fmtCount(v); });
      } });
      scales.y2 = { range: function (u, min, max) { return [0, pct ? 1 : Math.max(1, max) * 1.08]; } };
    }
    if (kind === "bars" || kind === "stackedbars") {
      var step = spec.x.length > 1 ? spec.x[1] - spec.x[0] : 3600;
      scales.x.range = function () { return [spec.x[0] - step / 2, spec.x[spec.x.length - 1] + step / 2]; };
    }
    var opts = {
      width: Math.max(320, el.clientWidth),
      height: 260,
      series: series,
      axes: axes,
      scales: scales,
      // Axes and ticks in UTC, as every instant on the pages.
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    // Kept on the element: the axes' labels are drawn on the canvas, and
    // the browser tests read them from it (axes[i]._values).
    el.uplot = new uPlot(opts, data, el);
    if (spec.note) {
      var note = document.createElement("p");
      note.className = "hint chart-note";
      note.textContent = spec.note;
      el.appendChild(note);
    }
    el.dataset.drawn = "true";
  }

  function drawAll() {
    document.querySelectorAll("[data-chart]").forEach(function (el) {
      try {
        draw(el);
      } catch (e) {
        el.dataset.drawn = "failed";
        throw e;
      }
    });
  }

  // The Enqueue form: its fields become the API's JSON body (empty ones
  // left out, params parsed as JSON when they are), and the answer is
  // shown below it, as text. The result's data-state is created, replayed
  // or refused.
  function say(out, state, parts) {
    out.hidden = false;
    out.dataset.state = state;
    out.className = "result " + (state === "refused" ? "bad" : "good");
    out.replaceChildren();
    parts.forEach(function (p) {
      if (typeof p === "string") {
        out.append(p);
      } else if (p.code) {
        var c = document.createElement("code");
        c.textContent = p.code;
        out.append(c);
      } else if (p.href) {
        var a = document.createElement("a");
        a.href = p.href;
        a.textContent = p.text;
        out.append(a);
      }
    });
  }

  // utc writes an RFC 3339 instant as the pages do: 2026-11-23 09:00 UTC.
  function utc(iso) {
    var d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }

  function enqueueForm(form) {
    var out = document.getElementById("enqueue-result");
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var body = { user_id: form.dataset.userId };
      new FormData(form).forEach(function (v, k) {
        v = String(v).trim();
        if (v === "") return;
        if (k === "params") {
          try { v = JSON.parse(v); } catch (e) { /* sent as text: the API says what is wrong */ }
        }
        body[k] = v;
      });
      var button = form.querySelector("button[type=submit]");
      button.disabled = true;
      fetch("/api/messages", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify(body),
      }).then(function (resp) {
        return resp.json().catch(function () { return { error: resp.statusText }; }).then(function (m) {
          var back = { href: "/users?id=" + encodeURIComponent(form.dataset.userId), text: "Reload to see it under Messages." };
          if (resp.status === 201) {
            say(out, "created", ["Queued: message ", { code: m.id }, ", " + m.type + ", " + m.status + ", due " + utc(m.scheduled_for) +
              (m.audit_id ? "; audit entry " + m.audit_id : "") + ". ", back]);
          } else if (resp.status === 200) {
            say(out, "replayed", ["Already queued under this key: message ", { code: m.id }, ", " + m.status + ". Nothing was changed" +
              (m.payload_differs ? "; this request differs from the message that stands, which was kept" : "") + ". ", back]);
          } else {
            say(out, "refused", ["Refused (" + resp.status + "): " + (m.error || resp.statusText)]);
          }
        });
      }).catch(function (e) {
        say(out, "refused", ["The request failed: " + e.message]);
      }).finally(function () {
        button.disabled = false;
      });
    });
  }

  function start() {
    var form = document.getElementById("enqueue");
    if (form) enqueueForm(form);
    drawAll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
