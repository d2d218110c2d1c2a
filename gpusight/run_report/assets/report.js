// Draws the report's charts with uPlot from the inlined JSON (#report-data) and keeps their time ranges in step.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var origin = data.origin;
  var xs = data.offsets.map(function (offset) { return origin + offset; });
  var plots = [];
  var syncing = false;
  var full = xs.length ? [xs[0] - data.bucket / 2, xs[xs.length - 1] + data.bucket / 2] : [origin, origin + 1];
  var lanes = document.getElementById("lanes");

  function utc(ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); }
  var minutes = uPlot.fmtDate("{HH}:{mm}");
  var seconds = uPlot.fmtDate("{HH}:{mm}:{ss}");
  var days = uPlot.fmtDate("{MM}-{DD} {HH}:{mm}");

  function timeLabels(u, splits) {
    var step = splits.length > 1 ? splits[1] - splits[0] : 60;
    var format = step < 60 ? seconds : (u.scales.x.max - u.scales.x.min > 2 * 86400 ? days : minutes);
    return splits.map(function (ts) { return format(utc(ts)); });
  }

  function setRange(min, max, from) {
    if (syncing) { return; }
    syncing = true;
    plots.forEach(function (plot) {
      if (plot !== from) { plot.setScale("x", { min: min, max: max }); }
    });
    drawLanes(min, max);
    syncing = false;
  }

  function zeroBased(u, min, max) { return [Math.min(0, min), max > 0 ? max * 1.05 : 1]; }

  function makeChart(chart) {
    var element = document.getElementById("chart-" + chart.id);
    if (!element) { return; }
    var title = document.createElement("div");
    title.className = "title";
    title.textContent = chart.title + " (" + chart.unit + ")";
    element.appendChild(title);
    if (chart.missing.length) {
      var missing = document.createElement("div");
      missing.className = "missing";
      missing.textContent = chart.missing.join(", ") + ": not reported";
      element.appendChild(missing);
    }
    if (!chart.series.length) { element.setAttribute("data-empty", "true"); return; }
    if (chart.stacked) { stacked(chart, element); return; }
    var columns = [xs];
    var series = [{ value: function (u, ts) { return ts == null ? "" : uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}")(utc(ts)); } }];
    var bands = [];
    var hidden = [];
    chart.series.forEach(function (line) {
      var high = columns.length;
      columns.push(line.max, line.mean, line.min);
      series.push({ label: line.label + " max", stroke: "transparent", points: { show: false } });
      series.push({ label: line.label, stroke: line.colour, width: 1.25, points: { show: false },
                    value: function (u, v) { return v == null ? "–" : v + " " + chart.unit; } });
      series.push({ label: line.label + " min", stroke: "transparent", points: { show: false } });
      bands.push({ series: [high, high + 2], fill: line.colour + "40" });
      hidden.push(high, high + 2);
    });
    addPlot(element, columns, series, bands, hidden, chart.percent ? { range: [0, 100] } : { range: zeroBased });
  }

  // A stacked chart: each layer's "top" is the running sum of the shares below it; bands fill between neighbours,
  // and the legend shows each layer's own share.
  function stacked(chart, element) {
    var zero = chart.series[0].top.map(function (v) { return v == null ? null : 0; });
    var columns = [xs, zero];
    var series = [{ value: function (u, ts) { return ts == null ? "" : uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}")(utc(ts)); } },
                  { label: "base", stroke: "transparent", points: { show: false } }];
    var bands = [];
    chart.series.forEach(function (layer, k) {
      columns.push(layer.top);
      series.push({ label: layer.label, stroke: layer.colour, width: 1, points: { show: false },
                    value: function (u, v, si, idx) { var s = idx == null ? null : layer.share[idx]; return s == null ? "–" : s + " %"; } });
      bands.push({ series: [k + 2, k + 1], fill: layer.colour + "99" });
    });
    addPlot(element, columns, series, bands, [1], { range: [0, 100] });
  }

  function addPlot(element, columns, series, bands, hidden, yScale) {
    var plot = new uPlot({
      width: Math.max(240, Math.floor(element.getBoundingClientRect().width)),
      height: 120,
      tzDate: utc,
      cursor: { sync: { key: "run", setSeries: false }, drag: { x: true, y: false } },
      scales: { x: { time: true }, y: yScale },
      axes: [{ size: 26, font: "11px system-ui", values: timeLabels }, { size: 52, font: "11px system-ui" }],
      series: series,
      bands: bands,
      hooks: {
        setScale: [function (u, key) { if (key === "x") { setRange(u.scales.x.min, u.scales.x.max, u); } }],
      },
    }, columns, element);
    var rows = plot.root.querySelectorAll(".u-legend .u-series");
    hidden.forEach(function (index) { if (rows[index]) { rows[index].style.display = "none"; } });
    plots.push(plot);
  }

  function drawLanes(min, max) {
    if (!lanes) { return; }
    lanes.textContent = "";
    var order = [];
    var byId = {};
    data.episodes.forEach(function (episode) {
      if (!byId[episode.id]) { byId[episode.id] = []; order.push(episode.id); }
      byId[episode.id].push(episode);
    });
    var span = max - min || 1;
    order.slice(0, 40).forEach(function (id) {
      var lane = document.createElement("div");
      lane.className = "lane";
      var name = document.createElement("div");
      name.className = "name";
      name.textContent = id;
      name.title = id;
      var track = document.createElement("div");
      track.className = "track";
      byId[id].forEach(function (episode) {
        var start = origin + episode.start;
        var end = Math.max(origin + episode.end, start + data.bucket);
        if (end < min || start > max) { return; }
        var bar = document.createElement("div");
        bar.className = "bar " + episode.severity;
        bar.style.left = (Math.max(start, min) - min) / span * 100 + "%";
        bar.style.width = (Math.min(end, max) - Math.max(start, min)) / span * 100 + "%";
        bar.title = episode.severity + ": " + episode.title;
        track.appendChild(bar);
      });
      lane.appendChild(name);
      lane.appendChild(track);
      lanes.appendChild(lane);
    });
    lanes.setAttribute("data-lanes", String(Math.min(order.length, 40)));
  }

  data.charts.forEach(makeChart);
  drawLanes(full[0], full[1]);
  var reset = document.getElementById("reset-zoom");
  if (reset) {
    reset.addEventListener("click", function () {
      if (plots.length) { plots[0].setScale("x", { min: full[0], max: full[1] }); } else { drawLanes(full[0], full[1]); }
    });
  }
  document.body.setAttribute("data-charts", String(plots.length));
  document.body.setAttribute("data-ready", "true");
})();
